"""The retention sweep against Azurite: only the provider's exact layout, only what one listing decided,
each blob only if unchanged since."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, tzinfo
from types import SimpleNamespace
from typing import Any, cast

import pytest
from airflow.exceptions import TaskDeferred

from airflow_kueue_provider.hooks.blob_containers import BlobAccountHook
from airflow_kueue_provider.hooks.blob_store import BlobStoreHook
from airflow_kueue_provider.hooks.ledger_store import LedgerStore
from airflow_kueue_provider.kueue.checkpoints.checkpoint_access import shard_container_name
from airflow_kueue_provider.kueue.checkpoints.checkpoint_retention import (
    MIN_OLDER_THAN,
    BlobInfo,
    ShardContainer,
)
from airflow_kueue_provider.kueue.checkpoints.ledger import RunLedger, ledger_prefix
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.names import TASK_ID_LABEL
from airflow_kueue_provider.operators import checkpoint_sweep
from airflow_kueue_provider.operators.checkpoint_sweep import KueueCheckpointSweepOperator
from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

from ..cluster import KUEUE_GROUP, KUEUE_VERSION, KueueEnv, short_id, wait_for
from .conftest import CONN_ID, read_ledger

SHARDS_TASK = ledger_prefix("genomics", "scheduled__2026-11-01", "shards")  # a task whose id is "shards"
OTHER_TASK = ledger_prefix("genomics", "scheduled__2026-11-01", "report")
LIVE_RETRY = ledger_prefix("genomics", "scheduled__2026-11-02", "align", 3)
ABANDONED = ledger_prefix("genomics", "scheduled__2026-11-03", "align")
FOREIGN = ["results/genome/shards/x.bam", "notes.txt", "a/b/c/d/ledger.json.bak"]


def _sweep(
    container: str,
    older_than: timedelta = MIN_OLDER_THAN,
    dry_run: bool = False,
    namespace: str = "default",
) -> dict[str, Any]:
    op = KueueCheckpointSweepOperator(
        task_id="sweep",
        checkpoint_conn_id=CONN_ID,
        container=container,
        older_than=older_than,
        dry_run=dry_run,
        namespace=namespace,
    )
    return op.execute({})  # type: ignore[arg-type]


def _days_later(monkeypatch: pytest.MonkeyPatch, days: int = 2) -> None:
    """The sweep's clock, ``days`` ahead: every blob written now is that old to it."""

    class Later(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> Later:  # type: ignore[override]
            return cast(Later, datetime.now(tz) + timedelta(days=days))

    monkeypatch.setattr(checkpoint_sweep, "datetime", Later)


def test_only_expired_provider_blobs_go_and_a_live_retry_keeps_what_it_writes(
    blob: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledgers = [f"{p}/ledger.json" for p in (SHARDS_TASK, OTHER_TASK, LIVE_RETRY)]
    shards = {  # each task instance's checkpoints live in its own shard container
        SHARDS_TASK: [f"{SHARDS_TASK}/shards/0/checkpoint-00000001.json"],
        LIVE_RETRY: [f"{LIVE_RETRY}/shards/7/checkpoint-00000001.json"],
        ABANDONED: [],  # a container whose pods never wrote (and no ledger)
    }
    live = shard_container_name(blob.container, LIVE_RETRY)
    foreign_container = f"{blob.container}-results"
    blob.service.create_container(foreign_container).upload_blob(f"{SHARDS_TASK}/shards/0/x.json", b"{}")
    with BlobAccountHook(CONN_ID, blob.container) as hook:
        hook.check()
        for name in ledgers + FOREIGN:
            hook.write_json(name, {"x": 1})
        for prefix, names in shards.items():
            hook.ensure_container(shard_container_name(blob.container, prefix), prefix)
            with hook.container_hook(shard_container_name(blob.container, prefix)) as container:
                for name in names:
                    container.write_json(name, {"x": 1})
        with hook.container_hook(live) as container:  # a pod may write any name in its own container:
            container.write_json(f"{OTHER_TASK}/shards/0/checkpoint-00000009.json", {"x": 1})  # not counted

        assert _sweep(blob.container)["prefixes"] == [], "nothing is old enough"
        _days_later(monkeypatch)
        dry = _sweep(blob.container, dry_run=True)
        assert dry["prefixes"] == sorted([SHARDS_TASK, OTHER_TASK, LIVE_RETRY])
        expected = ledgers + [
            f"{shard_container_name(blob.container, p)}:{n}" for p, ns in shards.items() for n in ns
        ]
        assert sorted(dry["deleted"]) == sorted(expected), (
            "foreign blobs and containers are not the provider's"
        )

        # A live retry writes while the sweep runs: right after the sweep listed its container it rewrites a
        # checkpoint it had and adds a new one.
        listed = BlobStoreHook.list_blobs

        def list_then_retry_writes(self: BlobStoreHook, prefix: str) -> list[BlobInfo]:
            items = listed(self, prefix)
            if self.container == live:
                self.write_json(f"{LIVE_RETRY}/shards/7/checkpoint-00000001.json", {"x": 2})
                self.write_json(f"{LIVE_RETRY}/shards/7/checkpoint-00000002.json", {"x": 3})
            return items

        monkeypatch.setattr(BlobStoreHook, "list_blobs", list_then_retry_writes)
        result = _sweep(blob.container)
        monkeypatch.undo()

        assert result["kept_changed"] == [f"{live}:{LIVE_RETRY}/shards/7/checkpoint-00000001.json"]
        assert sorted(n for n, _ in hook.list_names("")) == sorted(FOREIGN), "the ledgers went, nothing else"
        with hook.container_hook(live) as container:
            assert sorted(n for n, _ in container.list_names("")) == sorted(
                [f"{OTHER_TASK}/shards/0/checkpoint-00000009.json"]
                + [f"{LIVE_RETRY}/shards/7/checkpoint-0000000{n}.json" for n in (1, 2)]
            ), "what the retry wrote since the listing is kept, and so is its container"
        containers = {c.name for c in blob.service.list_containers(name_starts_with=blob.container)}
        assert containers == {blob.container, live, foreign_container}
        assert sorted(result["deleted_containers"]) == sorted(
            shard_container_name(blob.container, p) for p in (SHARDS_TASK, ABANDONED)
        )


def test_a_job_queued_past_older_than_keeps_its_ledger_and_checkpoints(
    kueue_env: KueueEnv, blob: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The acceptance line: a Job that waits in its queue writes nothing, so its blobs age past
    ``older_than``; the sweep keeps them while the Job lives and while its ledger says it runs."""
    kueue_env.cluster.custom.patch_cluster_custom_object(
        KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", kueue_env.cluster_queue, {"spec": {"stopPolicy": "Hold"}}
    )
    run_id = f"run-{short_id()}"
    op = KueueIndexedJobOperator(
        task_id="queued",
        namespace=kueue_env.namespace,
        queue_name=kueue_env.local_queue,
        image="example.invalid/shard:1",
        completions=2,
        checkpointing=Checkpointing(CONN_ID, blob.container),
    )
    ti = SimpleNamespace(dag_id="sweep", task_id="queued", run_id=run_id, try_number=2, map_index=-1)
    with pytest.raises(TaskDeferred):
        op.execute({"ti": ti})  # type: ignore[arg-type]
    prefix = ledger_prefix("sweep", run_id, "queued")
    salt = read_ledger(blob, prefix).container_salt
    assert salt is not None, "the first try drew its container's salt"
    shard_container = shard_container_name(blob.container, prefix, salt)
    checkpoint = f"{prefix}/shards/1/checkpoint-00000003.json"  # an earlier try's
    with BlobAccountHook(CONN_ID, blob.container) as hook, hook.container_hook(shard_container) as shards:
        shards.write_json(checkpoint, {"next": 3})
        (job,) = [j for j in kueue_env.jobs() if j.metadata.labels.get(TASK_ID_LABEL) == "queued"]
        assert kueue_env.workload(dict(kueue_env.cluster.api.sanitize_for_serialization(job))) is not None
        assert job.spec.suspend, "still queued: Kueue has not admitted it"

        _days_later(monkeypatch)
        result = _sweep(blob.container, namespace=kueue_env.namespace)
        assert result["prefixes"] == [] and prefix in result["kept_protected"], result
        assert "is live" in result["kept_protected"][prefix]
        assert hook.read_json(f"{prefix}/ledger.json")[0] is not None, "the ledger stays"
        assert shards.read_json(checkpoint)[0] == {"next": 3}, "and so do the checkpoints"

        # The Job gone (its worker died before recording the end): the running attempt still protects it.
        kueue_env.cluster.batch.delete_namespaced_job(
            job.metadata.name, kueue_env.namespace, propagation_policy="Background"
        )
        wait_for("the Job gone", lambda: kueue_env.job(job.metadata.name) is None, timeout=60)
        result = _sweep(blob.container, namespace=kueue_env.namespace)
        assert "running attempt" in result["kept_protected"][prefix]
        assert shards.read_json(checkpoint)[0] == {"next": 3}

        # Once the ledger records the attempt's end, the old prefix goes, container and all.
        LedgerStore(hook, prefix).update(
            lambda ledger: cast(RunLedger, ledger).with_job_progress(
                job.metadata.name, IndexSet(), IndexSet(), status="failed"
            )
        )
        result = _sweep(blob.container, namespace=kueue_env.namespace)
        assert result["prefixes"] == [prefix] and result["deleted_containers"] == [shard_container]
        assert hook.read_json(f"{prefix}/ledger.json")[0] is None


def test_an_emptied_container_is_kept_when_a_new_attempt_touches_it_after_the_listing(
    blob: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The container delete is conditional: a new attempt's access policy (set right after the sweep
    listed the container) modifies it, so the sweep's delete fails its condition and the container stays."""
    prefix = ledger_prefix("genomics", "scheduled__2026-11-04", "align")
    name = shard_container_name(blob.container, prefix)
    with BlobAccountHook(CONN_ID, blob.container) as hook:
        hook.check()
        hook.ensure_container(name, prefix)
        time.sleep(1.5)  # Last-Modified has one-second granularity
        listed = BlobAccountHook.shard_containers

        def list_then_new_attempt(self: BlobAccountHook) -> dict[str, ShardContainer]:
            found = listed(self)
            now = datetime.now(UTC)
            self.grant_access(name, "a-new-attempt", now, now + timedelta(hours=1))
            return found

        _days_later(monkeypatch)
        monkeypatch.setattr(BlobAccountHook, "shard_containers", list_then_new_attempt)
        result = _sweep(blob.container)
        assert result["deleted_containers"] == []
        assert blob.service.get_container_client(name).exists(), "the new attempt keeps its container"
        monkeypatch.setattr(BlobAccountHook, "shard_containers", listed)
        assert _sweep(blob.container)["deleted_containers"] == [name], "untouched since: it goes"


def test_two_bases_sharing_their_first_30_characters_never_sweep_each_others_checkpoints(
    blob: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = (blob.container + "-" + "x" * 40)[:30]
    ours, theirs = f"{head}-ours", f"{head}-theirs"
    prefix = ledger_prefix("genomics", "scheduled__2026-11-05", "align")
    checkpoint = f"{prefix}/shards/0/checkpoint-00000001.json"
    for base in (ours, theirs):
        with BlobAccountHook(CONN_ID, base) as hook:
            hook.check()
            hook.write_json(f"{prefix}/ledger.json", {"x": 1})
            hook.ensure_container(shard_container_name(base, prefix), prefix)
            with hook.container_hook(shard_container_name(base, prefix)) as shards:
                shards.write_json(checkpoint, {"base": base})
    assert shard_container_name(ours, prefix) != shard_container_name(theirs, prefix)

    _days_later(monkeypatch)
    result = _sweep(ours)
    assert result["deleted_containers"] == [shard_container_name(ours, prefix)]
    with BlobStoreHook(CONN_ID, shard_container_name(theirs, prefix), create_container=False) as shards:
        assert shards.read_json(checkpoint)[0] == {"base": theirs}, "the other base's checkpoints stay"


def test_containers_of_before_salts_and_orphans_of_a_ledger_made_anew_are_swept(
    blob: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stale task instance's salted container and its unsalted one (made before salts) go with it. A task
    instance whose ledger was made anew (salt B) and is written right now keeps its ledger and container,
    while its containers of another salt (A) or none are orphans: they go, checkpoints and all."""
    salt_a, salt_b = "a" * 32, "b" * 32
    stale = ledger_prefix("genomics", "scheduled__2026-11-06", "align")
    anew = ledger_prefix("genomics", "scheduled__2026-11-07", "align")
    checkpoint = "shards/0/checkpoint-00000001.json"
    base = blob.container
    salted, unsalted = shard_container_name(base, stale, salt_a), shard_container_name(base, stale)
    orphan, orphan_unsalted = shard_container_name(base, anew, salt_a), shard_container_name(base, anew)
    live = shard_container_name(base, anew, salt_b)
    with BlobAccountHook(CONN_ID, base) as hook:
        hook.check()
        LedgerStore(hook, stale).update(lambda _: RunLedger(2, container_salt=salt_a))
        LedgerStore(hook, anew).update(lambda _: RunLedger(2, container_salt=salt_b))
        for name, prefix, salt in [
            (salted, stale, salt_a),
            (unsalted, stale, None),
            (orphan, anew, salt_a),
            (orphan_unsalted, anew, None),
            (live, anew, salt_b),
        ]:
            hook.ensure_container(name, prefix, salt)
            if name in (salted, orphan, live):
                with hook.container_hook(name) as shards:
                    shards.write_json(f"{prefix}/{checkpoint}", {"x": 1})
        listed = hook.shard_containers()
    assert {n: (c.prefix, c.salt) for n, c in listed.items()} == {
        salted: (stale, salt_a),
        unsalted: (stale, None),
        orphan: (anew, salt_a),
        orphan_unsalted: (anew, None),
        live: (anew, salt_b),
    }, "salted and unsalted shard containers are both found"

    # ``anew``'s ledger and live container are written as the sweep runs (its clock is 2 days on).
    fresh = {(None, f"{anew}/ledger.json"), (live, f"{anew}/{checkpoint}")}
    list_blobs = BlobStoreHook.list_blobs

    def written_now(self: BlobStoreHook, prefix: str) -> list[BlobInfo]:
        container = None if self.container == base else self.container
        later = datetime.now(UTC) + timedelta(days=2)
        return [
            BlobInfo(b.name, later, b.etag) if (container, b.name) in fresh else b
            for b in list_blobs(self, prefix)
        ]

    monkeypatch.setattr(BlobStoreHook, "list_blobs", written_now)
    _days_later(monkeypatch)
    dry = _sweep(base, dry_run=True)
    assert dry["prefixes"] == [stale] and dry["orphaned_containers"] == sorted([orphan, orphan_unsalted])
    assert sorted(dry["deleted_containers"]) == sorted([salted, unsalted, orphan, orphan_unsalted])
    assert sorted(dry["deleted"]) == sorted(
        [f"{stale}/ledger.json", f"{salted}:{stale}/{checkpoint}", f"{orphan}:{anew}/{checkpoint}"]
    )
    result = _sweep(base)
    assert sorted(result["deleted_containers"]) == sorted(dry["deleted_containers"])
    remaining = {c.name for c in blob.service.list_containers(name_starts_with=base)}
    assert remaining == {base, live}, "only the base and the ledger's own container stay"
    with BlobAccountHook(CONN_ID, base) as hook, hook.container_hook(live) as shards:
        assert LedgerStore(hook, anew).read() == RunLedger(2, container_salt=salt_b)
        assert shards.read_json(f"{anew}/{checkpoint}")[0] == {"x": 1}
