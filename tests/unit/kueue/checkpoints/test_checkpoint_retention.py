"""Stale checkpoint prefixes: judged by their newest blob."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_kueue_provider.kueue.checkpoints.checkpoint_retention import (
    MIN_OLDER_THAN,
    BlobInfo,
    ShardContainer,
    check_older_than,
    empty_containers_to_delete,
    is_orphan,
    maybe_orphans,
    plan_sweep,
    stale_prefixes,
    task_prefix,
)

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def test_task_prefix_of_provider_blobs_only() -> None:
    assert task_prefix("d/r/t/ledger.json") == "d/r/t"
    assert task_prefix("d/r/t/3/shards/7/checkpoint-00000001.json") == "d/r/t/3"
    assert task_prefix("someone-elses/file.txt") is None


def test_a_prefix_is_stale_only_when_its_newest_blob_is() -> None:
    blobs = [
        ("d/old/t/ledger.json", NOW - timedelta(days=30)),
        ("d/old/t/shards/0/checkpoint-00000001.json", NOW - timedelta(days=29)),
        ("d/busy/t/ledger.json", NOW - timedelta(days=30)),
        ("d/busy/t/shards/0/checkpoint-00000009.json", NOW - timedelta(hours=1)),  # still being written
        ("d/new/t/ledger.json", NOW - timedelta(days=1)),
    ]
    assert stale_prefixes(blobs, NOW, timedelta(days=7)) == ["d/old/t"]
    assert stale_prefixes(blobs, NOW, timedelta(0)) == ["d/busy/t", "d/new/t", "d/old/t"]


def test_only_the_exact_layout_is_the_providers() -> None:
    from airflow_kueue_provider.kueue.checkpoints.ledger import ledger_prefix

    shards_task = ledger_prefix("d", "r", "shards")
    assert task_prefix(f"{shards_task}/ledger.json") == shards_task
    assert task_prefix(f"{shards_task}/shards/0/checkpoint-00000001.json") == shards_task
    assert task_prefix("results/genome/shards/x.bam") is None, "a user's file, not a checkpoint"
    assert task_prefix("d/r/t/shards/x/checkpoint.json") is None
    assert task_prefix("d/r/t/shards/0") is None
    assert task_prefix("d/r/t/ledger.json.bak") is None
    assert task_prefix("d/r.x/t/ledger.json") is None, "a raw '.' never appears in an encoded segment"


def test_a_shard_container_counts_only_its_own_task_instances_checkpoints() -> None:
    from airflow_kueue_provider.kueue.checkpoints.checkpoint_retention import shard_blobs_of

    t = datetime(2026, 11, 1, tzinfo=UTC)
    listed = [
        BlobInfo("d/r/t/shards/0/checkpoint-00000001.json", t, "e1"),
        BlobInfo("d/r/other/shards/0/checkpoint-00000001.json", t, "e2"),  # shaped like another prefix
        BlobInfo("d/r/t/ledger.json", t, "e3"),  # ledgers never live in a shard container
        BlobInfo("d/r/t/shards/x", t, "e4"),
    ]
    assert shard_blobs_of("c-1", "d/r/t", listed) == [
        BlobInfo("d/r/t/shards/0/checkpoint-00000001.json", t, "e1", "c-1")
    ]


def test_empty_shard_containers_go_with_their_stale_prefix_or_when_old_and_unclaimed() -> None:
    from airflow_kueue_provider.kueue.checkpoints.checkpoint_retention import empty_containers_to_delete

    now = datetime(2026, 12, 1, tzinfo=UTC)
    old, new = now - timedelta(days=30), now - timedelta(hours=1)
    blobs = [BlobInfo("d/r/stale/ledger.json", old), BlobInfo("d/r/live/ledger.json", new)]
    plan = plan_sweep(blobs, now, timedelta(days=7))
    containers = {
        "c-stale": ShardContainer("d/r/stale", new),
        "c-live": ShardContainer("d/r/live", old),
        "c-abandoned": ShardContainer("d/r/none", old),
        "c-just-made": ShardContainer("d/r/new", new),  # its pods may not have written yet
    }
    assert empty_containers_to_delete(containers, plan, blobs, now, timedelta(days=7)) == [
        "c-abandoned",
        "c-stale",
    ]


def test_an_old_prefix_whose_job_may_still_run_is_kept_whole() -> None:
    """A Job that waits in its queue writes nothing: its old blobs alone do not make it stale."""
    old = NOW - timedelta(days=30)
    blobs = [
        BlobInfo("d/queued/t/ledger.json", old),
        BlobInfo("d/queued/t/shards/0/checkpoint-00000001.json", old, container="c-1"),
        BlobInfo("d/gone/t/ledger.json", old),
    ]
    why = {"d/queued/t": "the ledger has a running attempt (j-1)", "d/jobset/t": "Job ns/js-1 is live"}
    plan = plan_sweep(blobs, NOW, timedelta(days=7), why)
    assert plan.stale_prefixes == ("d/gone/t",)
    assert [b.name for b in plan.delete] == ["d/gone/t/ledger.json"]
    assert set(plan.kept_prefixes) == {"d/queued/t", "d/jobset/t"}
    assert dict(plan.protected) == why
    containers = {
        "c-1": ShardContainer("d/queued/t", old),
        "c-2": ShardContainer("d/jobset/t", old),
        "c-3": ShardContainer("d/other/t", old),
    }
    assert empty_containers_to_delete(containers, plan, blobs, NOW, timedelta(days=7)) == ["c-3"], (
        "a live Job's container (no blob yet) stays"
    )


def test_older_than_has_a_floor_with_a_clear_error() -> None:
    assert check_older_than(MIN_OLDER_THAN) == MIN_OLDER_THAN
    for bad in (timedelta(0), timedelta(hours=23)):
        with pytest.raises(
            ValueError, match=r"older_than=.* below the sweep's floor of 1 day.*timedelta\(days=1\)"
        ):
            check_older_than(bad)


SALT_A, SALT_B = "a" * 32, "b" * 32


def test_a_container_of_another_salt_than_its_ledgers_is_an_orphan_weighed_on_its_own() -> None:
    """The ledger of d/r/t was deleted and made anew (salt B, its new container c-new is being written);
    c-old (salt A) and c-unsalted (from before salts) are no try's: they go once old, and their old blobs
    neither keep nor are kept by the live prefix."""
    old, new = NOW - timedelta(days=30), NOW - timedelta(hours=1)
    containers = {
        "c-old": ShardContainer("d/r/t", old, SALT_A),
        "c-unsalted": ShardContainer("d/r/t", old),
        "c-new": ShardContainer("d/r/t", new, SALT_B),
        "c-other": ShardContainer("d/r/u", old, SALT_A),  # its ledger's: kept with its prefix
    }
    blobs = [
        BlobInfo("d/r/t/ledger.json", new),
        BlobInfo("d/r/t/shards/0/checkpoint-00000001.json", old, "e1", "c-old"),
        BlobInfo("d/r/t/shards/0/checkpoint-00000002.json", new, "e2", "c-new"),
        BlobInfo("d/r/u/ledger.json", new),
    ]
    week = timedelta(days=7)
    maybe = maybe_orphans(containers, [], blobs, NOW, week)
    assert maybe == ["c-old", "c-other", "c-unsalted"], "only old containers of kept prefixes: ledger read"
    salts = {"d/r/t": SALT_B, "d/r/u": SALT_A}
    orphans = {n: containers[n] for n in maybe if is_orphan(containers[n], salts[containers[n].prefix])}
    assert sorted(orphans) == ["c-old", "c-unsalted"]

    plan = plan_sweep(blobs, NOW, week, {}, orphans)
    assert plan.stale_prefixes == () and plan.orphaned == ("c-old", "c-unsalted")
    assert [(b.container, b.name) for b in plan.delete] == [
        ("c-old", "d/r/t/shards/0/checkpoint-00000001.json")
    ]
    assert empty_containers_to_delete(containers, plan, blobs, NOW, week) == ["c-old", "c-unsalted"]
    assert not is_orphan(ShardContainer("d/r/v", old), None), "an unsalted container of an old ledger"

    guarded = plan_sweep(blobs, NOW, week, {"d/r/t": "the ledger has a running attempt (j-2)"}, orphans)
    assert guarded.orphaned == () and guarded.delete == (), "never while the task instance runs"
    fresh = {"c-old": ShardContainer("d/r/t", new, SALT_A)}  # touched within the week
    assert plan_sweep(blobs, NOW, week, {}, fresh).orphaned == ()
