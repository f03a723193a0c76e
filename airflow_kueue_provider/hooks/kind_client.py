"""One blocking client per job kind, with the same methods: what the operator base calls on "its object"
whatever the kind (docs/design.md, "Job kinds"). A new kind adds a class here; nothing else in the operator
base changes."""

from __future__ import annotations

import functools
from typing import Any, Protocol

from kubernetes import client

from ..kueue.airflow_identity import AirflowIdentity
from ..kueue.identity_seal import IdentitySeal
from ..kueue.jobset import JOBSET_GROUP, JOBSET_PLURAL, JOBSET_VERSION
from .cluster_target import ClusterTarget
from .jobset_hook import JobSetHook
from .kueue_hook import KueueHook
from .retry import call_with_retry


class KindClient(Protocol):
    """A job kind's objects, as the API's JSON dicts; ``hook`` for what every kind shares (queues, Secrets,
    pod logs)."""

    noun: str
    uid_sealed: bool
    """The kind gets a uid seal right after create (docs/tenancy.md): the worker may patch it."""

    @property
    def hook(self) -> KueueHook: ...

    def get(self, namespace: str, name: str) -> dict[str, Any] | None: ...
    def create(self, body: dict[str, Any]) -> dict[str, Any]: ...
    def task_instance_objects(self, namespace: str, identity: AirflowIdentity) -> list[dict[str, Any]]: ...
    def patch_metadata(
        self, namespace: str, name: str, metadata: dict[str, Any], uid: str | None = None
    ) -> None: ...
    def delete_unless_finished(self, namespace: str, name: str, uid: str | None = None) -> str: ...
    def seal_manifest(self, manifest: dict[str, Any], annotations: dict[str, str]) -> None: ...
    def seal_uid(self, obj: dict[str, Any], seal: IdentitySeal) -> None: ...


def _with_uid(metadata: dict[str, Any], uid: str | None) -> dict[str, Any]:
    """A merge patch of ``metadata``; with ``uid``, a precondition: the patch fails (409) on a namesake."""
    return {"metadata": {**metadata, "uid": uid} if uid else dict(metadata)}


class JobClient:
    noun = "Job"
    uid_sealed = True

    def __init__(self, target: ClusterTarget | str) -> None:
        target = ClusterTarget.of(target)
        self.hook = KueueHook(target.conn_id, **target.overrides())

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.hook.get_job(namespace, name)

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.hook.create_job(body)

    def task_instance_objects(self, namespace: str, identity: AirflowIdentity) -> list[dict[str, Any]]:
        return self.hook.task_instance_jobs(namespace, identity, unsealed_too=True)  # reattach sorts them

    def patch_metadata(
        self, namespace: str, name: str, metadata: dict[str, Any], uid: str | None = None
    ) -> None:
        batch = client.BatchV1Api(self.hook.api)
        body = _with_uid(metadata, uid)
        call_with_retry(lambda: batch.patch_namespaced_job(name, namespace, body), "patch the Job")

    def delete_unless_finished(self, namespace: str, name: str, uid: str | None = None) -> str:
        return self.hook.delete_job_unless_finished(namespace, name, uid=uid)

    @staticmethod
    def seal_manifest(manifest: dict[str, Any], annotations: dict[str, str]) -> None:
        """The name seal into the Job to create."""
        manifest["metadata"].setdefault("annotations", {}).update(annotations)

    def seal_uid(self, obj: dict[str, Any], seal: IdentitySeal) -> None:
        """The uid seal onto ``obj`` as created (uid precondition: never onto a namesake)."""
        meta = obj["metadata"]
        annotations = seal.uid_annotations(self.noun, obj)
        self.patch_metadata(meta["namespace"], meta["name"], {"annotations": annotations}, meta["uid"])
        meta.setdefault("annotations", {}).update(annotations)


class JobSetClient:
    noun = "JobSet"
    uid_sealed = False
    """The worker's Role may not patch JobSets (it could unsuspend one): the name seal alone."""

    def __init__(self, target: ClusterTarget | str) -> None:
        target = ClusterTarget.of(target)
        self.hook: JobSetHook = JobSetHook(target.conn_id, **target.overrides())

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.hook.get_jobset(namespace, name)

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.hook.create_jobset(body)

    def task_instance_objects(self, namespace: str, identity: AirflowIdentity) -> list[dict[str, Any]]:
        return self.hook.task_instance_jobsets(namespace, identity, unsealed_too=True)

    def patch_metadata(
        self, namespace: str, name: str, metadata: dict[str, Any], uid: str | None = None
    ) -> None:
        custom = client.CustomObjectsApi(self.hook.api)
        patch = functools.partial(
            custom.patch_namespaced_custom_object,
            JOBSET_GROUP,
            JOBSET_VERSION,
            namespace,
            JOBSET_PLURAL,
            name,
            _with_uid(metadata, uid),
        )
        call_with_retry(patch, "patch the JobSet")

    def delete_unless_finished(self, namespace: str, name: str, uid: str | None = None) -> str:
        return self.hook.delete_jobset_unless_finished(namespace, name, uid=uid)

    @staticmethod
    def seal_manifest(manifest: dict[str, Any], annotations: dict[str, str]) -> None:
        """The name seal into the JobSet and into each replicated job's template, so its Jobs carry their
        JobSet's seal (what the UI shows of the task: ``IdentitySeal.is_sealed_child``)."""
        manifest["metadata"].setdefault("annotations", {}).update(annotations)
        for rj in manifest.get("spec", {}).get("replicatedJobs") or []:
            template = rj.setdefault("template", {})
            template.setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)

    def seal_uid(self, obj: dict[str, Any], seal: IdentitySeal) -> None:
        """No uid seal for a JobSet (``uid_sealed``)."""
