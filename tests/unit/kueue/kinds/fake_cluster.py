"""An in-memory apiserver for the kind-seam tests: the objects of any kind by their plural, Kueue's
Workloads, and watch streams. The operator reaches it through the real ``KindClient`` (only its transport,
``_call``, is replaced) and the trigger through the real shared watch (only the async hook is replaced)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, ClassVar

from kubernetes.client.rest import ApiException

from airflow_kueue_provider.hooks.kind_client import KindClient
from airflow_kueue_provider.kueue.kinds import KindDescription, finished_condition
from airflow_kueue_provider.kueue.names import JOB_UID_LABEL

NOW = "2026-12-04T10:00:00Z"


class FakeCluster:
    """One namespace's worth of state; ``emit`` feeds the watch streams of the running event loop."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, dict[str, Any]]] = {}  # plural -> name -> object
        self.workloads: dict[str, dict[str, Any]] = {}  # by the job-uid label
        self.streams: dict[str, list[asyncio.Queue[tuple[str, dict[str, Any]]]]] = {}
        self.local_queues = {"q"}
        self._ids: Iterator[int] = itertools.count(1)
        self.deleted: list[str] = []

    def _stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"]["resourceVersion"] = str(next(self._ids))
        return obj

    def emit(self, plural: str, event_type: str, obj: dict[str, Any]) -> None:
        for queue in self.streams.get(plural, []):
            queue.put_nowait((event_type, obj))

    def put(self, plural: str, obj: dict[str, Any], event_type: str = "MODIFIED") -> None:
        self._stamp(obj)
        self.objects.setdefault(plural, {})[obj["metadata"]["name"]] = obj
        self.emit(plural, event_type, obj)

    def admit(self, kind: KindDescription, name: str) -> None:
        """Kueue admits the object: its Workload is Admitted, the object unsuspended."""
        obj = self.objects[kind.api.plural][name]
        uid = obj["metadata"]["uid"]
        workload = {
            "metadata": {
                "name": f"wl-{name}",
                "uid": f"wl-{uid}",
                "labels": {JOB_UID_LABEL: uid},
                "ownerReferences": [{"kind": kind.kind, "name": name, "uid": uid, "controller": True}],
            },
            "spec": {"queueName": "q"},
            "status": {
                "conditions": [
                    {"type": "QuotaReserved", "status": "True", "lastTransitionTime": NOW},
                    {"type": "Admitted", "status": "True", "lastTransitionTime": NOW},
                ],
                "admission": {"clusterQueue": "cq", "podSetAssignments": []},
            },
        }
        self.workloads[uid] = self._stamp(workload)
        self.emit("workloads", "ADDED", workload)
        obj["spec"]["suspend"] = False
        obj.setdefault("status", {})["startTime"] = NOW
        self.put(kind.api.plural, obj)

    def finish(self, kind: KindDescription, name: str, job_status: str) -> None:
        obj = self.objects[kind.api.plural][name]
        obj.setdefault("status", {}).update({"jobStatus": job_status, "endTime": NOW})
        self.put(kind.api.plural, obj)

    def remove(self, kind: KindDescription, name: str) -> None:
        obj = self.objects[kind.api.plural].pop(name)
        self.deleted.append(name)
        self.emit(kind.api.plural, "DELETED", obj)

    # --- the custom-objects calls KindClient makes ----------------------------------------------------------
    def call(self, kind: KindDescription, method: str, namespace: str, *args: Any, **kwargs: Any) -> Any:
        store = self.objects.setdefault(kind.api.plural, {})
        if method == "create_namespaced_custom_object":
            body = args[0]
            if body["metadata"]["name"] in store:
                raise ApiException(status=409, reason="AlreadyExists")
            created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # the trigger's submitted_at
            body["metadata"].update(uid=f"uid-{next(self._ids)}", creationTimestamp=created)
            self.put(kind.api.plural, body, "ADDED")
            return body
        if method == "list_namespaced_custom_object":
            return {"items": list(store.values())}
        name = args[0]
        if name not in store:
            raise ApiException(status=404, reason="NotFound")
        if method == "get_namespaced_custom_object":
            return store[name]
        if method == "delete_namespaced_custom_object":
            self.remove(kind, name)
            return {}
        raise AssertionError(f"the fake cluster has no {method}")


class FakeSyncHook:
    """What the operator template asks of the blocking hook besides the kind's objects."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

    def connection_namespace(self) -> str:
        return "ns"

    def get_local_queue(self, namespace: str, name: str) -> dict[str, Any] | None:
        return {"metadata": {"name": name}} if name in self.cluster.local_queues else None

    def list_local_queues(self, namespace: str) -> list[dict[str, Any]]:
        return [{"metadata": {"name": q}} for q in sorted(self.cluster.local_queues)]


def fake_client_class(cluster: FakeCluster) -> type[KindClient]:
    """The real KindClient, talking to ``cluster`` instead of an apiserver."""

    class FakeKindClient(KindClient):
        def __init__(self, kind: KindDescription, target: Any) -> None:
            self.kind = kind
            self.hook = FakeSyncHook(cluster)  # type: ignore[assignment]

        def _call(self, method: str, namespace: str, *args: Any, **kwargs: Any) -> Any:
            return cluster.call(self.kind, method, namespace, *args, **kwargs)

    return FakeKindClient


class FakeAsyncHook:
    """The async hook the shared watch and the trigger open: LIST, WATCH, GET and delete of any kind."""

    cluster: ClassVar[FakeCluster]

    def __init__(self, target: Any) -> None:
        pass

    @asynccontextmanager
    async def session(self) -> AsyncIterator[FakeAsyncHook]:
        yield self

    async def list_kind(
        self, kind: KindDescription, namespace: str, **_: Any
    ) -> tuple[list[dict[str, Any]], str]:
        return [
            dict(o, metadata=dict(o["metadata"]))
            for o in self.cluster.objects.get(kind.api.plural, {}).values()
        ], "1"

    async def list_workloads(self, namespace: str, **_: Any) -> tuple[list[dict[str, Any]], str]:
        return list(self.cluster.workloads.values()), "1"

    def _stream(self, plural: str) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
        self.cluster.streams.setdefault(plural, []).append(queue)

        async def events() -> AsyncIterator[tuple[str, dict[str, Any]]]:
            try:
                while True:
                    event_type, obj = await queue.get()
                    yield event_type, dict(obj, metadata=dict(obj["metadata"]))
            finally:
                self.cluster.streams[plural].remove(queue)

        return events()

    def watch_kind(self, kind: KindDescription, *args: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        return self._stream(kind.api.plural)

    def watch_workloads(self, *args: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        return self._stream("workloads")

    async def get_kind(self, kind: KindDescription, namespace: str, name: str) -> dict[str, Any] | None:
        return self.cluster.objects.get(kind.api.plural, {}).get(name)

    async def children_of(self, kind: KindDescription, namespace: str, name: str) -> list[dict[str, Any]]:
        return []

    async def workload_for_job(self, namespace: str, uid: str) -> dict[str, Any] | None:
        return self.cluster.workloads.get(uid)

    async def pending_workloads(self, namespace: str, local_queue: str) -> dict[str, Any] | None:
        return None

    async def delete_unless_finished(
        self, kind: KindDescription, namespace: str, name: str, uid: str | None = None
    ) -> str:
        obj = self.cluster.objects.get(kind.api.plural, {}).get(name)
        if obj is None or (uid and obj["metadata"]["uid"] != uid):
            return "gone"
        if finished_condition(obj) is not None:
            return "finished"
        self.cluster.remove(kind, name)
        return "deleted"
