"""One blocking client for the objects of any registered job kind: what the operator base calls on "its
object" whatever the kind (docs/design.md, "Job kinds"). It reads the kind's description
(``kueue.kinds``): its API coordinates, whether the worker seals its uid, where its child Jobs' templates
are. A new kind adds no code here."""

from __future__ import annotations

import functools
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from ..kueue.identity.airflow_identity import AirflowIdentity
from ..kueue.identity.identity_seal import IdentitySeal, sealed_only
from ..kueue.identity.job_ownership import belongs_to_task_instance, delete_unless_finished_step
from ..kueue.kinds import KindDescription
from .cluster_target import ClusterTarget
from .identity_key import identity_seal
from .kueue_hook import DELETE_ATTEMPTS, KueueApiError, KueueHook
from .retry import call_with_retry


def _with_uid(metadata: dict[str, Any], uid: str | None) -> dict[str, Any]:
    """A merge patch of ``metadata``; with ``uid``, a precondition: the patch fails (409) on a namesake."""
    return {"metadata": {**metadata, "uid": uid} if uid else dict(metadata)}


class KindClient:
    """A job kind's objects, as the API's JSON dicts; ``hook`` for what every kind shares (queues, Secrets,
    pod logs)."""

    def __init__(self, kind: KindDescription, target: ClusterTarget | str) -> None:
        target = ClusterTarget.of(target)
        self.kind = kind
        self.hook = KueueHook(target.conn_id, **target.overrides())

    @property
    def noun(self) -> str:
        return self.kind.kind

    @property
    def uid_sealed(self) -> bool:
        """The kind gets a uid seal right after create (docs/tenancy.md): the worker may patch it."""
        return self.kind.uid_sealed

    def _call(self, method: str, namespace: str, *args: Any, **kwargs: Any) -> Any:
        """``CustomObjectsApi.<method>`` at the kind's coordinates (core groups too: ``/apis/batch/v1``)."""
        api = self.kind.api
        call = getattr(client.CustomObjectsApi(self.hook.api), method)
        return call(api.group, api.version, namespace, api.plural, *args, **kwargs)

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return dict(call_with_retry(lambda: self._call("get_namespaced_custom_object", namespace, name),
                                        f"read {self.noun}"))  # fmt: skip
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create the object; a 409 (it exists) goes to the caller, which decides whether to reattach."""
        namespace = body["metadata"]["namespace"]
        create = functools.partial(self._call, "create_namespaced_custom_object", namespace, body)
        return dict(call_with_retry(create, f"create {self.noun}"))

    def dry_run(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The object as the apiserver would create it (its admission webhooks' defaults: Kueue's
        ``spec.managedBy`` on a MultiKueue queue), nothing created; None when the apiserver refuses it (an
        object of that name exists, RBAC, a policy): the real create then decides, and names the fix."""
        namespace = body["metadata"]["namespace"]
        create = functools.partial(
            self._call, "create_namespaced_custom_object", namespace, body, dry_run="All"
        )
        try:
            return dict(call_with_retry(create, f"dry-run create {self.noun}"))
        except ApiException:
            return None

    def task_instance_objects(
        self, namespace: str, identity: AirflowIdentity, *, unsealed_too: bool = True
    ) -> list[dict[str, Any]]:
        """This provider's objects of one task instance (any try), oldest first; ones being deleted left
        out. The labels pre-select on the server, the full identity in the annotations decides (labels are
        hashed and can collide between run ids); without ``unsealed_too``, objects without the task's seal
        are left out too (docs/tenancy.md). Reattach sorts them itself, so it asks for all."""
        selector = identity.task_instance_selector()
        listing = functools.partial(
            self._call, "list_namespaced_custom_object", namespace, label_selector=selector
        )
        listed = call_with_retry(listing, f"list {self.noun}s")
        objs = [
            o
            for o in listed.get("items") or []
            if belongs_to_task_instance(o, identity) and o["metadata"].get("deletionTimestamp") is None
        ]
        objs = objs if unsealed_too else sealed_only(objs, identity_seal(), self.noun)
        return sorted(objs, key=lambda o: o["metadata"].get("creationTimestamp") or "")

    def patch_metadata(
        self, namespace: str, name: str, metadata: dict[str, Any], uid: str | None = None
    ) -> None:
        patch = functools.partial(
            self._call, "patch_namespaced_custom_object", namespace, name, _with_uid(metadata, uid)
        )
        call_with_retry(patch, f"patch the {self.noun}")

    def delete_unless_finished(self, namespace: str, name: str, uid: str | None = None) -> str:
        """Delete the object (its Jobs, pods and Workload go with it) if it is still queued or running:
        "deleted", "finished" (kept: it holds nothing and is the run's record) or "gone". The delete carries
        the read's uid and resourceVersion as preconditions (``delete_unless_finished_step``)."""
        for attempt in range(1, DELETE_ATTEMPTS + 1):
            step = delete_unless_finished_step(self.get(namespace, name), uid, attempt == DELETE_ATTEMPTS)
            if isinstance(step, str):
                return step
            delete = functools.partial(
                self._call, "delete_namespaced_custom_object", namespace, name, body=step
            )
            try:
                call_with_retry(delete, f"delete {self.noun}")
                return "deleted"
            except ApiException as exc:
                if exc.status == 404:
                    return "gone"
                if exc.status != 409:  # 409: it changed since the read; look again
                    raise
        raise KueueApiError(
            f"{self.noun} {namespace}/{name} could not be deleted: it kept changing (409 Conflict)"
        )

    def seal_manifest(self, manifest: dict[str, Any], annotations: dict[str, str]) -> None:
        """The name seal into the object to create and into its child Jobs' templates (a JobSet's replicated
        jobs'), so its Jobs carry their parent's seal (what the UI shows of the task:
        ``IdentitySeal.is_sealed_child``)."""
        manifest["metadata"].setdefault("annotations", {}).update(annotations)
        for template in self.kind.child_templates(manifest):
            template.setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)

    def seal_uid(self, obj: dict[str, Any], seal: IdentitySeal) -> None:
        """The uid seal onto ``obj`` as created (uid precondition: never onto a namesake); none for a kind the
        worker may not patch (``uid_sealed``: a JobSet, which a patch could unsuspend)."""
        if not self.uid_sealed:
            return
        meta = obj["metadata"]
        annotations = seal.uid_annotations(self.noun, obj)
        self.patch_metadata(meta["namespace"], meta["name"], {"annotations": annotations}, meta["uid"])
        meta.setdefault("annotations", {}).update(annotations)
