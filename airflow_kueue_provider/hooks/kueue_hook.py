"""Synchronous Kubernetes + Kueue calls for operators (submit, reattach, inspect, delete)."""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
from kubernetes import client
from kubernetes.client.rest import ApiException

from ..kueue.airflow_identity import AirflowIdentity
from ..kueue.errors import KueueProviderError
from ..kueue.identity_seal import sealed_only
from ..kueue.job_ownership import belongs_to_task_instance
from ..kueue.kinds import KindDescription, child_kind, parent_names
from ..kueue.names import (
    DAG_ID_LABEL,
    INDEX_LABEL,
    JOB_NAME_LABEL,
    JOB_UID_LABEL,
    RUN_ID_LABEL,
    TASK_ID_LABEL,
)
from . import kueue_api
from .identity_key import identity_seal
from .retry import call_with_retry

log = logging.getLogger(__name__)
DELETE_ATTEMPTS = 5  # reads + conditioned deletes before "delete unless finished" gives up


class KueueApiError(RuntimeError, KueueProviderError):
    """A Kubernetes/Kueue call could not do what was asked; the message says what and why."""


class KueueHook:
    """Kueue-aware calls over the cncf ``kubernetes`` connection (in-cluster, kubeconfig file, context).

    Objects come back as plain dicts (the API's JSON), which is what the pure domain model reads.
    """

    def __init__(
        self,
        kubernetes_conn_id: str = "kubernetes_default",
        cluster_context: str | None = None,
        config_file: str | None = None,
        in_cluster: bool | None = None,
    ) -> None:
        self.kubernetes_conn_id = kubernetes_conn_id
        self._kube = KubernetesHook(
            conn_id=kubernetes_conn_id,
            cluster_context=cluster_context,
            config_file=config_file,
            in_cluster=in_cluster,
        )

    def connection_namespace(self) -> str | None:
        """The connection's ``namespace`` extra (what KubernetesPodOperator falls back to)."""
        return self._kube.get_namespace()

    @functools.cached_property
    def api(self) -> client.ApiClient:
        return self._kube.get_conn()

    def _json(self, obj: Any) -> dict[str, Any]:
        return dict(self.api.sanitize_for_serialization(obj))

    @staticmethod
    def _items(call: Any, what: str) -> list[dict[str, Any]]:
        """A LIST's items as the API's JSON. ``call(_preload_content=False)`` skips the client's models: their
        round trip costs ~0.4 ms an Event and more for a Job, in the API server process that also serves the
        UI and the Execution API (6.6x slower than ``json.loads`` for a Job's 100 Events)."""
        answer = call_with_retry(lambda: call(_preload_content=False), what)
        return list(json.loads(answer.data).get("items") or [])

    def _get_raw(self, path: str) -> dict[str, Any]:
        def call() -> dict[str, Any]:
            resp = self.api.call_api(
                path,
                "GET",
                auth_settings=["BearerToken"],
                _preload_content=False,
                header_params={"Accept": "application/json"},
            )
            raw = resp[0] if isinstance(resp, tuple) else resp
            return dict(json.loads(raw.data))

        return call_with_retry(call, f"GET {path}")

    @functools.cached_property
    def kueue_version(self) -> str:
        """v1beta2 when served (Kueue 0.15 and later; the only one from 0.20), else v1beta1."""
        try:
            group = self._get_raw(f"/apis/{kueue_api.KUEUE_GROUP}")
        except ApiException as exc:
            if exc.status != 404:
                raise
            group = {}  # the group is not served at all (no Kueue): pick_version says so
        return kueue_api.pick_version(group)

    # --- queues -------------------------------------------------------------------------------------
    def list_local_queues(self, namespace: str | None) -> list[dict[str, Any]]:
        """LocalQueues in ``namespace``, or in every namespace when it is None."""
        custom = client.CustomObjectsApi(self.api)
        group, version = kueue_api.KUEUE_GROUP, self.kueue_version
        res = call_with_retry(
            lambda: (
                custom.list_cluster_custom_object(group, version, "localqueues")
                if namespace is None
                else custom.list_namespaced_custom_object(group, version, namespace, "localqueues")
            ),
            "list LocalQueues",
        )
        return list(res.get("items", []))

    def list_cluster_queues(self) -> list[dict[str, Any]]:
        custom = client.CustomObjectsApi(self.api)
        group, version = kueue_api.KUEUE_GROUP, self.kueue_version
        res = call_with_retry(
            lambda: custom.list_cluster_custom_object(group, version, "clusterqueues"),
            "list ClusterQueues",
        )
        return list(res.get("items", []))

    def get_local_queue(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get_custom("localqueues", name, namespace)

    def _get_custom(self, plural: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """One Kueue object, None when it does not exist. Before the version is known (a worker's first Kueue
        call: its LocalQueue check), it asks in the newest version and learns from the answer, so a task
        sends no discovery GET; only a refusal of that version (a Kueue older than 0.15) discovers."""
        if "kueue_version" not in self.__dict__:
            newest = kueue_api.SUPPORTED_VERSIONS[0]
            try:
                found = self._get_custom_in(newest, plural, name, namespace)
            except ApiException as exc:
                if exc.status != 404 or not kueue_api.version_not_served(exc.body, name):
                    raise
            else:
                self.__dict__["kueue_version"] = newest  # what the cached_property would hold
                return found
        return self._get_custom_in(self.kueue_version, plural, name, namespace)

    def _get_custom_in(
        self, version: str, plural: str, name: str, namespace: str | None
    ) -> dict[str, Any] | None:
        custom = client.CustomObjectsApi(self.api)
        group = kueue_api.KUEUE_GROUP
        try:
            if namespace:
                return dict(
                    call_with_retry(
                        lambda: custom.get_namespaced_custom_object(group, version, namespace, plural, name),
                        f"get {plural}/{name}",
                    )
                )
            return dict(
                call_with_retry(
                    lambda: custom.get_cluster_custom_object(group, version, plural, name),
                    f"get {plural}/{name}",
                )
            )
        except ApiException as exc:
            if exc.status == 404 and not kueue_api.version_not_served(exc.body, name):
                return None  # the object is missing (a 404 that names it)
            raise

    def pending_position(
        self, namespace: str, local_queue: str, workload_name: str
    ) -> tuple[int, int] | None:
        pending = self.pending_workloads(namespace, local_queue)
        return None if pending is None else kueue_api.position_of(pending, workload_name)

    def pending_workloads(self, namespace: str, local_queue: str) -> dict[str, Any] | None:
        """The LocalQueue's pending Workloads in Kueue's order (its visibility API); None where that API is
        not served (feature gate VisibilityOnDemand) or the read fails."""
        try:
            return self._get_raw(kueue_api.pending_workloads_path(self.kueue_version, namespace, local_queue))
        except ApiException:
            return None

    # --- jobs ---------------------------------------------------------------------------------------
    def get_workload_priority_class(self, name: str) -> dict[str, Any] | None:
        return self._get_custom("workloadpriorityclasses", name)

    def find_jobs(self, namespace: str | None, labels: dict[str, str]) -> list[dict[str, Any]]:
        """Jobs with ``labels`` in ``namespace``, or in every namespace when it is None."""
        batch = client.BatchV1Api(self.api)
        selector = kueue_api.label_selector(labels)
        if namespace is None:
            return self._items(
                functools.partial(batch.list_job_for_all_namespaces, label_selector=selector), "list Jobs"
            )
        return self._items(
            functools.partial(batch.list_namespaced_job, namespace, label_selector=selector), "list Jobs"
        )

    def task_instance_jobs(
        self, namespace: str | None, identity: AirflowIdentity, *, unsealed_too: bool = False
    ) -> list[dict[str, Any]]:
        """This provider's Jobs of one (dag, task, run, map index), oldest first; namespace None: all.

        The labels pre-select on the server; the full identity in the annotations decides (labels are hashed
        and can collide between run ids). Jobs being deleted are left out, and so are Jobs without the task's
        seal (docs/tenancy.md) unless ``unsealed_too`` (reattach sorts them itself)."""
        labels = identity.labels()
        selector = {k: labels[k] for k in (DAG_ID_LABEL, TASK_ID_LABEL, RUN_ID_LABEL)}
        jobs = [
            j
            for j in self.find_jobs(namespace, selector)
            if belongs_to_task_instance(j, identity) and j["metadata"].get("deletionTimestamp") is None
        ]
        jobs = jobs if unsealed_too else self._sealed_or_proven_children(namespace, selector, jobs)
        return sorted(jobs, key=lambda j: j["metadata"].get("creationTimestamp") or "")

    def _sealed_or_proven_children(
        self, namespace: str | None, selector: dict[str, str], jobs: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """The Jobs sealed as the task's, and the child Jobs of its sealed parents (a JobSet's). A child
        carries its parent's seal and labels, which anyone who reads it can copy: it counts only when a
        sealed parent of the task controls it by uid (``KindDescription.owns_child``). One more LIST per
        parent kind, only when there are children."""
        seal, noun = identity_seal(), child_kind().kind
        sealed = [j for j in jobs if seal.is_sealed(noun, j)]
        children = [j for j in jobs if not seal.is_sealed(noun, j) and seal.is_sealed_child(j)]
        proven: list[dict[str, Any]] = []
        for parent in {kind.kind: kind for j in children for kind, _ in parent_names(j)}.values():
            parents = sealed_only(self._task_objects(parent, namespace, selector), seal, parent.kind)
            proven += [j for j in children if any(parent.owns_child(j, p) for p in parents)]
        return sealed + proven

    def _task_objects(
        self, kind: KindDescription, namespace: str | None, selector: dict[str, str]
    ) -> list[dict[str, Any]]:
        """The objects of ``kind`` with the task's labels; none when this identity may not list them (no
        child Job is shown then: deploy/rbac/ui.yaml grants the read)."""
        custom, labels = client.CustomObjectsApi(self.api), kueue_api.label_selector(selector)
        api = kind.api
        if namespace is None:
            call = functools.partial(
                custom.list_cluster_custom_object, api.group, api.version, api.plural, label_selector=labels
            )
        else:
            call = functools.partial(
                custom.list_namespaced_custom_object,
                api.group, api.version, namespace, api.plural, label_selector=labels,
            )  # fmt: skip
        try:
            return self._items(call, f"list {kind.kind}s")
        except ApiException as exc:
            if exc.status not in (403, 404):  # 404: no such API on this cluster
                raise
            log.warning(
                "cannot list %ss (HTTP %s): a %s task's Jobs are not shown; grant get/list on %s "
                "(deploy/rbac/ui.yaml)",
                kind.kind,
                exc.status,
                kind.kind,
                api.resource,
            )
            return []

    def delete_job(
        self,
        namespace: str,
        name: str,
        propagation_policy: str = "Background",
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> bool:
        """Delete the Job (Kueue then removes its Workload; never delete the Workload itself). With ``uid``
        only that object, never a namesake that replaced it; with ``resource_version`` only if it has not
        changed since it was read. False when it was already gone, or (preconditions) is another object or
        has changed."""
        batch = client.BatchV1Api(self.api)
        preconditions = (
            client.V1Preconditions(uid=uid, resource_version=resource_version)
            if uid or resource_version
            else None
        )
        options = client.V1DeleteOptions(propagation_policy=propagation_policy, preconditions=preconditions)
        try:
            call_with_retry(lambda: batch.delete_namespaced_job(name, namespace, body=options), "delete Job")
            return True
        except ApiException as exc:
            if exc.status == 404 or (exc.status == 409 and preconditions is not None):
                return False
            raise

    def create_secret(self, body: dict[str, Any]) -> bool:
        """Create a Secret; False when one of that name exists. An error never carries the request body
        (it holds the secret): only the status and reason."""
        core = client.CoreV1Api(self.api)
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            call_with_retry(lambda: core.create_namespaced_secret(namespace, body), "create Secret")
            return True
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise KueueApiError(
                f"could not create Secret {namespace}/{name}: HTTP {exc.status} {exc.reason}"
            ) from None

    def workload_for_job(self, namespace: str, job_uid: str) -> dict[str, Any] | None:
        custom = client.CustomObjectsApi(self.api)
        res = call_with_retry(
            lambda: custom.list_namespaced_custom_object(
                kueue_api.KUEUE_GROUP,
                self.kueue_version,
                namespace,
                "workloads",
                label_selector=f"{JOB_UID_LABEL}={job_uid}",
            ),
            "list Workloads",
        )
        return kueue_api.first_owned_by(list(res.get("items", [])), job_uid)

    def pods_of_job(self, namespace: str, job_name: str) -> list[dict[str, Any]]:
        """The pods the Job controls (its ``job-name`` label pre-selects; anyone can set a label)."""
        core = client.CoreV1Api(self.api)
        selector = f"{JOB_NAME_LABEL}={job_name}"
        pods = self._items(
            functools.partial(core.list_namespaced_pod, namespace, label_selector=selector), "list pods"
        )
        return [p for p in pods if kueue_api.controlled_by_job(p, job_name)]

    def events_of(self, namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
        """The (core/v1) Events recorded on one object, e.g. a Job or its Workload."""
        core = client.CoreV1Api(self.api)
        selector = f"involvedObject.kind={kind},involvedObject.name={name}"
        return self._items(
            functools.partial(core.list_namespaced_event, namespace, field_selector=selector), "list Events"
        )

    def failed_index_log_tails(
        self, namespace: str, job_name: str, indexes: list[int], lines: int = 20
    ) -> dict[int, str]:
        """The last ``lines`` log lines of the newest pod of each failed index (best effort)."""
        by_index = kueue_api.pods_by_index(self.pods_of_job(namespace, job_name), job_name)
        tails: dict[int, str] = {}
        for index in indexes:
            candidates = by_index.get(index)
            if candidates:
                tails[index] = self._log_tail(namespace, candidates[0], lines)
        return tails

    def index_log_tail(
        self,
        namespace: str,
        job_name: str,
        index: int,
        lines: int,
        limit_bytes: int,
        job_uid: str | None = None,
    ) -> tuple[str, str] | None:
        """(pod name, its last ``lines`` log lines, at most ``limit_bytes``) of the newest pod of one index of
        a Job (``job_uid``: that very Job, its pods' controller); None when the index has no pod of the Job's
        (yet, or any longer). One index's pods by label, not the whole Job's (100,000 indexes, maybe)."""
        core = client.CoreV1Api(self.api)
        selector = f"{JOB_NAME_LABEL}={job_name},{INDEX_LABEL}={index}"
        found = self._items(
            functools.partial(core.list_namespaced_pod, namespace, label_selector=selector), "list pods"
        )
        pods = kueue_api.pods_by_index(found, job_name, job_uid).get(index)
        if not pods:
            return None
        return pods[0]["metadata"]["name"], self._log_tail(namespace, pods[0], lines, limit_bytes)

    def _log_tail(
        self, namespace: str, pod: dict[str, Any], lines: int, limit_bytes: int | None = None
    ) -> str:
        """A pod's log tail, or why it cannot be read (logs are a courtesy: never the reason a call fails)."""
        core = client.CoreV1Api(self.api)
        limit = {"limit_bytes": limit_bytes} if limit_bytes else {}
        try:
            # The raw body: with the body preloaded, the client turns a log that is not JSON into str(bytes),
            # "b'...\\n'", for every kubelet (it decodes only JSON response types).
            answer = core.read_namespaced_pod_log(
                pod["metadata"]["name"],
                namespace,
                tail_lines=lines,
                _request_timeout=10,
                _preload_content=False,
                **limit,
            )
            return pod_log_text(answer.data)
        except Exception as exc:
            return no_logs_note(pod, exc)


def pod_log_text(body: bytes | str) -> str:
    """A pod log's bytes as text (a log is whatever the program wrote: undecodable bytes are replaced)."""
    return body if isinstance(body, str) else body.decode("utf-8", errors="replace")


def no_logs_note(pod: dict[str, Any], exc: Exception) -> str:
    """What stands in for a failed pod's logs when they cannot be read: why, then how the pod ended.

    A 404 for ``pods/log`` means the node's kubelet has no logs for the pod; a terminated container with no
    ``containerID`` never ran in a container runtime: a fake pod of KWOK (the local cluster's nodes), which
    has no logs at all. A 404 for the pod itself: it was deleted meanwhile. Any other error (403, a timeout,
    ...) is named as it came."""
    name = pod.get("metadata", {}).get("name", "?")
    status = getattr(exc, "status", None)
    body = _api_body(exc) if isinstance(exc, ApiException) else {}
    if isinstance(exc, ApiException) and status == 404:
        if (body.get("details") or {}).get("kind") == "pods":
            why = f"pod {name} is gone: deleted before its logs were read"
        elif _never_ran_in_a_runtime(pod):
            why = (
                f"pod {name}'s logs are not available: it is a fake pod (KWOK, no container runtime) "
                "and has none"
            )
        else:
            why = f"pod {name}'s logs are not available: its node's kubelet has none (HTTP 404)"
    elif isinstance(exc, ApiException):
        message = f": {str(body['message'])[:200]}" if body.get("message") else ""
        why = f"pod {name}'s logs could not be read: HTTP {status} {exc.reason}{message}"
    else:
        why = f"pod {name}'s logs could not be read: {type(exc).__name__}: {str(exc)[:200]}"
    return f"({why}; {_status_line(pod)})"


def _never_ran_in_a_runtime(pod: dict[str, Any]) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return bool(statuses) and not any(s.get("containerID") for s in statuses)


def _api_body(exc: ApiException) -> dict[str, Any]:
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def _status_line(pod: dict[str, Any]) -> str:
    for status in pod.get("status", {}).get("containerStatuses") or []:
        term = (status.get("state") or {}).get("terminated")
        if term:
            name, code = status.get("name"), term.get("exitCode")
            said = ": ".join(str(part)[:200] for part in (term.get("reason"), term.get("message")) if part)
            return f"container {name} exited with code {code}" + (f" ({said})" if said else "")
    return f"pod phase {pod.get('status', {}).get('phase')}"
