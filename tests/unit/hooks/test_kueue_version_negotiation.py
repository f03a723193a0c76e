"""Both hooks ask the cluster which ``kueue.x-k8s.io`` version it serves and use it for every Kueue call and
for the visibility API: v1beta2 where served (Kueue 0.15+, the only one from 0.20), v1beta1 on an older
Kueue."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from airflow_kueue_provider.hooks import kueue_api
from airflow_kueue_provider.hooks.kueue_async_hook import AsyncKueueHook, load_clients
from airflow_kueue_provider.hooks.kueue_hook import KueueHook

ONLY_V1BETA1 = {"versions": [{"version": "v1beta1"}]}
ONLY_V1BETA2 = {"versions": [{"version": "v1beta2"}]}  # Kueue v0.20
BOTH = {"versions": [{"version": "v1beta2"}, {"version": "v1beta1"}]}  # Kueue 0.15 to 0.19
_conn_ids = itertools.count()


class FakeApi:
    """Answers discovery with ``group`` and the visibility API with an empty list; records every path."""

    def __init__(self, group: dict[str, Any] | None) -> None:
        self.group = group
        self.paths: list[str] = []

    def get(self, path: str, error: Any) -> dict[str, Any]:
        self.paths.append(path)
        if path == f"/apis/{kueue_api.KUEUE_GROUP}":
            if self.group is None:
                raise error(status=404, reason="Not Found")
            return self.group
        listed = {"metadata": {"name": "wl"}, "positionInLocalQueue": 2, "positionInClusterQueue": 5}
        return {"items": [listed]}


def _sync(group: dict[str, Any] | None) -> tuple[str, tuple[int, int] | None, list[str]]:
    fake = FakeApi(group)
    hook = KueueHook(kubernetes_conn_id=f"negotiation-{next(_conn_ids)}")
    hook._get_raw = lambda path: fake.get(path, ApiException)  # type: ignore[method-assign]
    version = hook.kueue_version
    return version, hook.pending_position("ns", "lq", "wl"), fake.paths


def _async(group: dict[str, Any] | None) -> tuple[str, tuple[int, int] | None, list[str]]:
    async def run() -> tuple[str, tuple[int, int] | None, list[str]]:
        await load_clients()
        from kubernetes_asyncio.client.exceptions import ApiException as AsyncApiException

        fake = FakeApi(group)
        hook = AsyncKueueHook(kubernetes_conn_id=f"negotiation-{next(_conn_ids)}")

        async def get_raw(path: str) -> dict[str, Any]:
            return fake.get(path, AsyncApiException)

        hook.get_raw = get_raw  # type: ignore[method-assign]
        version = await hook.kueue_version()
        return version, await hook.pending_position("ns", "lq", "wl"), fake.paths

    return asyncio.run(run())


@pytest.mark.parametrize("negotiate", [_sync, _async], ids=["sync", "async"])
@pytest.mark.parametrize(
    ("served", "expected"), [(ONLY_V1BETA1, "v1beta1"), (ONLY_V1BETA2, "v1beta2"), (BOTH, "v1beta2")]
)
def test_the_served_version_is_used_for_kueue_and_its_visibility_api(
    negotiate: Any, served: dict[str, Any], expected: str
) -> None:
    version, position, paths = negotiate(served)
    assert version == expected
    assert position == (2, 5)
    assert paths == [
        "/apis/kueue.x-k8s.io",
        f"/apis/visibility.kueue.x-k8s.io/{expected}/namespaces/ns/localqueues/lq/pendingworkloads",
    ]


@pytest.mark.parametrize("negotiate", [_sync, _async], ids=["sync", "async"])
def test_a_cluster_without_kueue_is_a_clear_error(negotiate: Any) -> None:
    with pytest.raises(kueue_api.UnsupportedKueueVersion, match=r"serves \[\].*install Kueue"):
        negotiate(None)


class FakeCustomObjects:
    """``get_namespaced_custom_object`` as an apiserver serving ``served`` versions and LocalQueue ``lq``."""

    def __init__(self, served: tuple[str, ...]) -> None:
        self.served, self.calls = served, []  # type: ignore[var-annotated]

    def get_namespaced_custom_object(self, group: str, version: str, ns: str, plural: str, name: str) -> Any:
        self.calls.append(version)
        if version not in self.served:
            raise ApiException(status=404, reason="Not Found")  # body: "404 page not found" or no details
        if name != "lq":
            exc = ApiException(status=404, reason="Not Found")
            exc.body = json.dumps({"kind": "Status", "reason": "NotFound", "details": {"name": name}})
            raise exc
        return {"metadata": {"name": name}}


@pytest.mark.parametrize(
    ("served", "group", "asked", "version"),
    [
        (("v1beta2", "v1beta1"), BOTH, ["v1beta2"], "v1beta2"),
        (("v1beta2",), ONLY_V1BETA2, ["v1beta2"], "v1beta2"),
        (("v1beta1",), ONLY_V1BETA1, ["v1beta2", "v1beta1"], "v1beta1"),
    ],
    ids=["kueue-0.15-0.19", "kueue-0.20", "kueue-0.14"],
)
def test_a_workers_local_queue_check_needs_no_discovery_get_where_the_newest_version_is_served(
    served: tuple[str, ...], group: dict[str, Any], asked: list[str], version: str, monkeypatch: Any
) -> None:
    """A task's first Kueue call asks in v1beta2 and learns the version from the answer: one request fewer a
    task. Only an older Kueue, which refuses v1beta2, costs the discovery GET."""
    from kubernetes import client

    fake, api = FakeCustomObjects(served), FakeApi(group)
    hook = KueueHook(kubernetes_conn_id=f"negotiation-{next(_conn_ids)}")
    hook.__dict__["api"] = object()
    hook._get_raw = lambda path: api.get(path, ApiException)  # type: ignore[method-assign]
    monkeypatch.setattr(client, "CustomObjectsApi", lambda _api: fake)
    assert hook.get_local_queue("ns", "lq") == {"metadata": {"name": "lq"}}
    assert hook.get_local_queue("ns", "missing") is None, "a missing LocalQueue is None, in either version"
    assert fake.calls == [*asked, version]
    assert hook.kueue_version == version
    assert api.paths == ([] if version == "v1beta2" else [f"/apis/{kueue_api.KUEUE_GROUP}"])
