"""The shared watch against the real apiserver: server-side watch timeouts, 410 Gone, and when it gives up (an
identity the worker's Role without workloads, or without anything): the reason, and a fresh hub afterwards."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes_asyncio.client.rest import ApiException

from airflow_kueue_provider.hooks.cluster_target import ClusterTarget
from airflow_kueue_provider.hooks.kueue_async_hook import AsyncKueueHook
from airflow_kueue_provider.kueue.kinds import KindDescription
from airflow_kueue_provider.kueue.kinds.job import JOB
from airflow_kueue_provider.triggers.kueue_job import KueueJobTrigger
from airflow_kueue_provider.watch import namespace_watch, watch_rounds
from airflow_kueue_provider.watch.namespace_watch import ANY_JOB, NamespaceWatch, WatchUnavailable
from devcluster.layout import PORTS

from ..cluster import KueueEnv, wait_for
from ..deploy.test_rbac import RBAC, Identity
from ..tcp_proxy import FreezableProxy, kubeconfig_through
from ..triggers.test_kueue_job_trigger import _first_event, _submit, _trigger


def test_trigger_completes_across_many_server_side_watch_timeouts(
    kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch_rounds, "WATCH_ROUND_SECONDS", 1.5)  # the apiserver ends each after ~1 s
    job = _submit(kueue_env, run_duration="5s")

    event = asyncio.run(_first_event(_trigger(kueue_env, job)))

    assert event["status"] == "success" and event["completed_indexes"] == "0-2"


def count_job_lists(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The resourceVersion of every Jobs LIST the hooks make from now on (the real LIST still answers)."""
    real_list = AsyncKueueHook.list_kind
    listed: list[str] = []

    async def counting_list(
        self: AsyncKueueHook, kind: KindDescription, namespace: str, **kw: Any
    ) -> tuple[list[dict[str, Any]], str]:
        items, version = await real_list(self, kind, namespace, **kw)
        if kind is JOB:
            listed.append(version)
        return items, version

    monkeypatch.setattr(AsyncKueueHook, "list_kind", counting_list)
    return listed


def test_a_round_the_apiserver_ends_goes_on_from_its_last_version_without_a_list(
    kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rounds of about a second on the real apiserver while a Job runs: a round that delivered its Job's
    changes is followed by a WATCH from the last of them, not by a LIST (as client-go's reflector does)."""
    monkeypatch.setattr(watch_rounds, "WATCH_ROUND_SECONDS", 1.5)
    real_watch = AsyncKueueHook.watch_kind
    listed = count_job_lists(monkeypatch)
    watched_from: list[str] = []

    async def counting_watch(
        self: AsyncKueueHook, kind: KindDescription, namespace: str, version: str, *args: Any
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        if kind is JOB:
            watched_from.append(version)
        async for event in real_watch(self, kind, namespace, version, *args):
            yield event

    monkeypatch.setattr(AsyncKueueHook, "watch_kind", counting_watch)
    job = _submit(kueue_env, run_duration="5s")

    event = asyncio.run(_first_event(_trigger(kueue_env, job)))

    assert event["status"] == "success" and event["completed_indexes"] == "0-2"
    resumed = [v for v in watched_from if v not in listed]
    assert resumed, f"every WATCH started at a LIST's version: {watched_from} (LISTs: {listed})"
    assert len(listed) < len(watched_from), (listed, watched_from)


def test_a_410_gone_on_the_watch_makes_the_hub_list_again(
    kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first Jobs watch answers 410 Gone (as the apiserver does for a resourceVersion its watch cache no
    longer holds; on a fresh cluster that depends on compaction timing, so it is injected here)."""
    real_watch = AsyncKueueHook.watch_kind
    lists = count_job_lists(monkeypatch)

    async def gone_once(
        self: AsyncKueueHook, kind: KindDescription, *args: Any
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        if kind is JOB and len(lists) == 1:
            raise ApiException(status=410, reason="Gone: too old resource version")
        async for event in real_watch(self, kind, *args):
            yield event

    monkeypatch.setattr(AsyncKueueHook, "watch_kind", gone_once)
    job = _submit(kueue_env, run_duration="1s", hold=True)

    async def scenario() -> dict[str, Any]:
        follow = asyncio.create_task(_first_event(_trigger(kueue_env, job)))
        await asyncio.to_thread(wait_for, "a second LIST after the 410", lambda: len(lists) >= 2, 60)
        await asyncio.to_thread(kueue_env.release_until_finished, job["metadata"]["name"])
        return await asyncio.wait_for(follow, 150)

    event = asyncio.run(scenario())

    assert event["status"] == "success" and event["completed_indexes"] == "0-2"
    assert len(lists) >= 2, "the hub listed again after the watch answered 410 Gone"


def test_a_watch_that_stays_open_but_misses_changes_is_caught_by_the_periodic_list(
    kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """What an apiserver whose watch cache stopped following etcd looks like: the Jobs watch stays open (its
    bookmarks keep it alive) and delivers nothing. The hub's periodic LIST sees the finished Job anyway."""
    monkeypatch.setattr(watch_rounds, "RESYNC_SECONDS", 4.0)
    monkeypatch.setattr(watch_rounds, "LAG_GRACE_SECONDS", 2.0)
    real_watch = AsyncKueueHook.watch_kind

    async def silent(self: AsyncKueueHook, kind: KindDescription, *args: Any) -> Any:
        async for event_type, obj in real_watch(self, kind, *args):
            if kind is not JOB or event_type == "BOOKMARK":
                yield event_type, obj  # the Jobs' bookmarks only: every change of a Job is lost

    monkeypatch.setattr(AsyncKueueHook, "watch_kind", silent)
    job = _submit(kueue_env, run_duration="1s", hold=True)

    async def scenario() -> dict[str, Any]:
        follow = asyncio.create_task(_first_event(_trigger(kueue_env, job)))
        await asyncio.to_thread(kueue_env.release_until_finished, job["metadata"]["name"])
        return await asyncio.wait_for(follow, 120)

    with caplog.at_level("WARNING", logger=namespace_watch.__name__):
        event = asyncio.run(scenario())

    assert event["status"] == "success" and event["completed_indexes"] == "0-2"
    assert "change(s) the watch had not delivered" in caplog.text


def test_a_watch_that_stalls_without_closing_is_relisted_and_the_trigger_succeeds(
    kueue_env: KueueEnv, devcluster_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The trigger's connections go through a proxy that freezes them (open, silent): the read timeout
    notices within WATCH_READ_TIMEOUT, the hub lists again on a new connection and sees the Job finish."""
    read_timeout = 5.0
    monkeypatch.setattr(watch_rounds, "WATCH_READ_TIMEOUT", read_timeout)
    job = _submit(kueue_env, run_duration="1s", hold=True)
    name = job["metadata"]["name"]
    with FreezableProxy("127.0.0.1", PORTS.apiserver).running() as proxy:
        kubeconfig = kubeconfig_through(
            proxy, Path(devcluster_env["KUBECONFIG"]), PORTS.apiserver, tmp_path / "kubeconfig-via-proxy"
        )
        conn = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}
        monkeypatch.setenv("AIRFLOW_CONN_KUBE_VIA_PROXY", json.dumps(conn))

        async def scenario() -> tuple[dict[str, Any], float, int]:
            trigger = KueueJobTrigger(
                job_name=name,
                namespace=kueue_env.namespace,
                queue_name=kueue_env.local_queue,
                kubernetes_conn_id="kube_via_proxy",
                job_uid=job["metadata"]["uid"],
            )
            follow = asyncio.create_task(_first_event(trigger))
            await asyncio.to_thread(wait_for, "pods running", lambda: len(kueue_env.running_pods(name)) == 3)
            hub = NamespaceWatch._hubs[(ClusterTarget("kube_via_proxy"), kueue_env.namespace)]
            await asyncio.wait_for(hub.synced.wait(), 30)
            lists_before = hub.lists
            assert proxy.freeze_open_connections() >= 1
            frozen_at = time.monotonic()
            await asyncio.to_thread(kueue_env.release_until_finished, name)  # finishes behind the freeze
            event = await asyncio.wait_for(follow, 120)
            return event, time.monotonic() - frozen_at, hub.lists - lists_before

        event, elapsed, relists = asyncio.run(scenario())

    assert event["status"] == "success" and event["completed_indexes"] == "0-2"
    assert relists >= 1, "the hub listed again after the stall"
    assert elapsed < 2 * read_timeout + 10, f"the stall was noticed and recovered from in {elapsed:.1f}s"


def _worker_without(
    kueue_env: KueueEnv, resources: set[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> tuple[Identity, list[dict[str, Any]]]:
    """The worker's identity (``deploy/rbac/worker-triggerer.yaml``) with ``resources`` cut from its Role;
    returns it and the Role's full rules (to grant them later)."""
    docs = list(yaml.safe_load_all((RBAC / "worker-triggerer.yaml").read_text()))
    (role,) = [d for d in docs if d["kind"] == "Role"]
    full = [dict(rule) for rule in role["rules"]]
    role["rules"] = [r for r in role["rules"] if not set(r["resources"]) & resources]
    manifest = tmp_path / "worker-cut.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    return Identity(kueue_env.cluster, str(manifest), kueue_env.namespace, monkeypatch, tmp_path), full


def _grant(identity: Identity, rules: list[dict[str, Any]]) -> None:
    """The platform adds the missing rules; returns once the identity may list Workloads and Jobs."""
    rbac = client.RbacAuthorizationV1Api(identity.cluster.api)
    (role,) = rbac.list_namespaced_role(identity.namespace).items
    rbac.patch_namespaced_role(role.metadata.name, identity.namespace, {"rules": rules})
    custom, batch = client.CustomObjectsApi(identity.api), client.BatchV1Api(identity.api)

    def allowed() -> bool:
        try:
            custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", identity.namespace, "workloads")
            batch.list_namespaced_job(identity.namespace)
        except client.ApiException:
            return False
        return True

    wait_for("the rules in force", allowed, 30)


def test_a_403_on_workloads_only_is_fatal_with_the_kind_and_the_rule(
    kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A Role without ``workloads``: every Jobs LIST succeeds and every Workloads LIST answers 403. Before,
    each Jobs LIST reset the one failure count and the followers waited for ever; now the Workloads' own count
    reaches FATAL_AFTER and the followers end with the kind, the status and the rule to add."""
    identity, _ = _worker_without(kueue_env, {"workloads"}, monkeypatch, tmp_path)
    try:

        async def scenario() -> WatchUnavailable:
            async with NamespaceWatch.follow(identity.conn_id, kueue_env.namespace, ANY_JOB) as follower:
                with pytest.raises(WatchUnavailable) as gave_up:
                    await asyncio.wait_for(follower.next(), 60)
                assert (ClusterTarget(identity.conn_id), kueue_env.namespace) not in NamespaceWatch._hubs
                return gave_up.value

        error = asyncio.run(scenario())
    finally:
        identity.delete()
    assert error.kind == "workloads" and error.status == 403, error
    assert f"the workloads LIST in namespace {kueue_env.namespace} failed 3 times in a row" in str(error)
    assert 'apiGroups ["kueue.x-k8s.io"], resources ["workloads"], verbs ["get", "list", "watch"]' in str(
        error
    )


def test_a_hub_that_gave_up_is_rebuilt_for_the_next_follower_while_a_ui_follower_is_still_joined(
    kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The identity may list nothing at first (its Role without jobs and workloads): the hub gives up
    while the queue page's follower (ANY_JOB) stays joined. The platform then adds the rules: a trigger that
    follows a Job now gets a fresh hub and sees its Job, not the stale error (before, the hub that gave up
    stayed in the registry as long as the page was open)."""
    identity, rules = _worker_without(kueue_env, {"jobs", "workloads"}, monkeypatch, tmp_path)
    job = _submit(kueue_env, run_duration="1s", hold=True)
    name, key = job["metadata"]["name"], (ClusterTarget(identity.conn_id), kueue_env.namespace)
    try:

        async def scenario() -> None:
            async with NamespaceWatch.follow(identity.conn_id, kueue_env.namespace, ANY_JOB) as queue_page:
                with pytest.raises(WatchUnavailable, match=r"the (jobs|workloads) LIST"):
                    await asyncio.wait_for(queue_page.next(), 60)
                await asyncio.to_thread(_grant, identity, rules)
                async with NamespaceWatch.follow(identity.conn_id, kueue_env.namespace, name) as trigger:
                    snapshot = await asyncio.wait_for(trigger.next(), 60)
                    assert (
                        snapshot.obj is not None and snapshot.obj["metadata"]["uid"] == job["metadata"]["uid"]
                    )
                    assert NamespaceWatch._hubs[key].error is None
                with pytest.raises(WatchUnavailable):
                    queue_page.current()  # the page keeps its old hub's reason until it reloads
            assert key not in NamespaceWatch._hubs

        asyncio.run(scenario())
    finally:
        identity.delete()
