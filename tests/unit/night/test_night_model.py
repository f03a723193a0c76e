"""The night's pure parts: the drawn workload and its ideal, the DAG files (they compile, and carry what the
report relies on), the shard accounting, and the picture."""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Any

import pytest

from airflow_kueue_provider.kueue.checkpoints.packing_choice import PackingChoice, ShardDuration
from airflow_kueue_provider.kueue.index_set import IndexSet
from tests.integration.night.dags import NightQueues, genomics_dag, risk_dag
from tests.integration.night.report import redone, shard_accounting, summarize, violations
from tests.integration.night.timeline_svg import render
from tests.integration.night.workload import NightShape, draw

QUEUES = NightQueues("g-ns", "night", "r-ns", "night", "night-x", "night-x")


def small() -> NightShape:
    return NightShape(
        samples=3, risk_shards=10, genomics_cpu=60, risk_cpu=8, risk_parallelism=8, parallelism=0
    )


def test_the_same_seed_draws_the_same_night_and_lengths_stay_in_their_bounds() -> None:
    a, b = draw(small()), draw(small())
    assert a.genomics == b.genomics and a.risk == b.risk
    assert [len(per_sample) for per_sample in a.genomics.values()] == [3, 3, 3]
    assert [len(a.genomics[s.name][0]) for s in a.shape.steps] == [24, 50, 19]
    for step in a.shape.steps:
        for shards in a.genomics[step.name]:
            assert all(step.median_seconds / 2 / 30 <= v <= step.median_seconds * 2 / 30 for v in shards)
    assert a.genomics != draw(NightShape(samples=3, genomics_cpu=60, seed=1)).genomics


def test_the_ideal_is_the_larger_of_the_quota_bound_and_the_critical_path() -> None:
    night = draw(small())
    work = night.genomics_shard_seconds() + night.risk_shard_seconds()
    assert night.quota_bound() == pytest.approx(work / 68)
    longest = max(sum(max(night.genomics[s.name][i]) for s in night.shape.steps) for i in range(3))
    assert night.critical_path() == pytest.approx(longest)
    assert night.ideal() == max(night.quota_bound(), night.critical_path())
    assert night.deadline_seconds() >= night.ideal() * 1.5


def test_bad_shapes_are_refused_with_what_to_change() -> None:
    with pytest.raises(ValueError, match="genomics_cpu=10 cannot admit a 50-shard step"):
        NightShape(genomics_cpu=10, parallelism=0)
    with pytest.raises(ValueError, match="samples=0"):
        NightShape(samples=0)
    with pytest.raises(ValueError, match="compression=0"):
        NightShape(compression=0)


@pytest.mark.parametrize("system", ["ours", "cncf"])
def test_the_dag_files_compile_and_map_every_step_over_the_samples(system: str) -> None:
    night = draw(small())
    source = genomics_dag(night, QUEUES, system, discover_pods_retry_number=7)
    ast.parse(source)
    assert "sample.expand(sample_id=list(range(3)))" in source and "align >> call >> gather" in source
    assert "night-x-gather" in source  # the step's Kueue priority
    if system == "ours":
        assert (
            source.count("checkpointing=CHECKPOINTS") == 3
            and f"deadline={night.deadline_seconds()}" in source
        )
    else:
        assert "discover_pods_retry_number=7" in source and "pool_slots=50" in source
    ast.parse(risk_dag(night, QUEUES, system, discover_pods_retry_number=7))
    if system == "ours":  # per-index retries unless the night asks for the whole-Job backoffLimit
        assert source.count("backoff_limit_per_index=4,") == 3
        whole = genomics_dag(
            draw(replace(small(), whole_job_backoff=True)), QUEUES, system, discover_pods_retry_number=7
        )
        assert whole.count("backoff_limit_per_index=None,") == 3 and "backoff_limit_per_index=4" not in whole
    with pytest.raises(ValueError, match="system='flyte'"):
        genomics_dag(night, QUEUES, "flyte", discover_pods_retry_number=1)


def _phase(
    night: Any, jobs: list[dict[str, Any]], pods: list[dict[str, Any]], tis: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "system": "ours",
        "started": 0.0,
        "risk_started": 5.0,
        "ended": 100.0,
        "states": {"night_genomics": {"success": len(tis)}},
        "task_instances": tis,
        "jobs": jobs,
        "pods": pods,
        "workloads": [],
        "evictions": [],
        "ui": [],
        "processes": [],
        "quota": [],
        "timeline": [],
        "apiserver": {"total": 0, "airflow": 0},
        "postgres": {},
        "cluster_queues": [],
    }


def _job(uid: str, task: str, shard_ids: list[int], done: str) -> dict[str, Any]:
    return {
        "uid": uid, "dag_id": "night_genomics", "task_id": task, "map_index": 0, "shard_ids": shard_ids,
        "completed_indexes": done, "created": 1.0, "complete": 9.0, "failed": None,
    }  # fmt: skip


def _ti(task: str) -> dict[str, Any]:
    return {"dag_id": "night_genomics", "task_id": task, "map_index": 0, "state": "success",
            "start_date": None, "end_date": None}  # fmt: skip


def test_a_retry_that_runs_only_the_unfinished_shards_loses_none_and_repeats_none() -> None:
    night = draw(small())
    jobs = [
        _job("j1", "sample.align", list(range(24)), "0-20"),
        _job("j2", "sample.align", [21, 22, 23], "0-2"),
    ]
    found = shard_accounting(night, _phase(night, jobs, [], [_ti("sample.align")]))
    assert found["shards_lost"] == 0 and found["completed_twice"] == 0


def test_a_retry_that_reruns_every_shard_completes_them_twice_and_a_gap_is_lost() -> None:
    night = draw(small())
    jobs = [
        _job("j1", "sample.align", list(range(24)), "0-20"),
        _job("j2", "sample.align", list(range(24)), "0-22"),
    ]
    pods = [{"job_uid": "j2", "index": 3, "phase": "Succeeded"}] * 2
    found = shard_accounting(night, _phase(night, jobs, pods, [_ti("sample.align")]))
    assert found["completed_twice"] == 21 + 1  # shards 0-20 in both Jobs, index 3 by two pods of j2
    assert found["shards_lost"] == 1 and found["lost_in"] == ["sample.align[0] (success): 1"]


def test_work_lost_on_an_evicted_node_is_told_apart_from_other_losses() -> None:
    phase = {
        "ended": 100.0,
        "evictions": [{"at": 50.0, "node": "spot-1"}],
        "pods": [
            {"phase": "Failed", "running": 40.0, "ended": 50.5, "node": "spot-1"},
            {"phase": "Failed", "running": 40.0, "ended": 45.0, "node": "spot-2"},
            {"phase": "Succeeded", "running": 40.0, "ended": 60.0, "node": "spot-1"},
        ],
    }
    found = redone(phase)
    assert found["redone_shard_seconds_spot"] == 10.5 and found["redone_per_eviction"] == 10.5
    assert found["redone_shard_seconds_other"] == 5.0 and found["pods_lost_other"] == 1


def test_a_summary_and_a_picture_come_out_of_an_empty_night_without_errors() -> None:
    night = draw(small())
    phase = _phase(night, [], [], [])
    phase["timeline"] = [{"at": 1.0, "running": {"align": 3}}, {"at": 2.0, "running": {"call": 5, "risk": 2}}]
    phase["evictions"] = [{"at": 1.5, "node": "n"}]
    row = summarize(night, phase)
    assert row["shards_lost"] == 0 and row["deadline_met"] is True
    svg = render([phase], night.ideal(), night.deadline_seconds(), "a <night>")
    assert svg.startswith("<svg") and "a &lt;night&gt;" in svg and svg.count("<polygon") == 3


def test_every_invariant_names_its_evidence() -> None:
    night = draw(small())
    jobs = [_job("j1", "sample.align", list(range(24)), "0-22")]
    phase = _phase(night, jobs, [], [_ti("sample.align")])
    phase["states"] = {"night_genomics": {"success": 1, "failed": 1}}
    phase["workloads"] = [{"job_uid": "j1", "admitted": [10.0], "evicted": []}]
    phase["pods"] = [
        {"name": "early", "job_uid": "j1", "index": 0, "phase": "Succeeded", "created": 5.0},
        {"name": "late", "job_uid": "j1", "index": 1, "phase": "Succeeded", "created": 10.2},
    ]
    phase["timeline"] = [{"at": 1.0, "running": {"align": 60, "risk": 9}}]
    found = violations(night, phase)
    assert found[0].startswith("night_genomics: task states")
    assert "1 shards lost" in found[1]
    assert "1 pods created before their Workload held quota: ['early']" in found
    assert "1 samples with more than 68 pods running (the cohort's quota)" in found
    phase["states"] = {"night_genomics": {"success": 1}}
    phase["jobs"] = [_job("j1", "sample.align", list(range(24)), "0-23")]
    phase["pods"] = phase["pods"][1:]
    phase["timeline"] = []
    assert violations(night, phase) == []


def test_the_quota_invariant_reads_the_apiservers_clock_when_it_has_it() -> None:
    night = draw(small())
    phase = _phase(night, [_job("j1", "sample.align", list(range(24)), "0-23")], [], [_ti("sample.align")])
    # the pod watch delivered before the Workload watch (seen 3 s early), the apiserver's seconds agree
    phase["workloads"] = [{"job_uid": "j1", "admitted": [13.0], "evicted": [], "api_reserved": [10.0]}]
    phase["pods"] = [{"name": "p", "job_uid": "j1", "index": 0, "phase": "Succeeded", "created": 10.0,
                      "api_created": 10.0}]  # fmt: skip
    assert violations(night, phase) == []
    phase["pods"][0]["api_created"] = 9.0
    assert violations(night, phase) == ["1 pods created before their Workload held quota: ['p']"]


def test_a_pods_outcome_is_its_first_terminal_phase() -> None:
    """The pod GC marks a lost node's pod Failed (the Job replaces it); KWOK's scheduled completion may still
    write Succeeded over it. Counted as completed, the replacement's success would make the shard "completed
    twice" (one short night in six failed so; its record was not kept, and this is the path that can)."""
    from tests.integration.night.recorder import ClusterRecorder

    recorder = ClusterRecorder(None, ["ns"])
    meta = {
        "uid": "p1",
        "namespace": "ns",
        "name": "job-3-abcde",
        "ownerReferences": [{"kind": "Job", "uid": "j1", "controller": True}],
        "annotations": {"batch.kubernetes.io/job-completion-index": "3"},
    }
    for phase in ("Running", "Failed", "Succeeded"):
        recorder._pod({"metadata": meta, "spec": {"nodeName": "spot-1"}, "status": {"phase": phase}})
    assert recorder.pods["p1"].phase == "Failed"


def test_a_packed_night_runs_each_indexs_shards_in_its_fake_pod_and_counts_them_through_the_packs() -> None:
    """``pack_shards``: ours' DAG asks for the operator's packs, each fake pod runs its pack's lengths, and
    the report maps a completed index to every shard of its pack (the cncf DAG runs one shard a pod)."""
    from dataclasses import replace

    night = draw(replace(small(), parallelism=8, pack_shards=True, risk_shards=200))
    call = night.shape.steps[1]
    stated = night.shape.stated_seconds_of(call)
    assert stated == call.median_seconds / night.shape.compression
    packs = PackingChoice(None, ShardDuration(stated, stated), 8).packs(IndexSet.range(0, call.shards))
    assert packs.per_pod > 1 and packs.index_count % 8 == 0, "whole waves of the parallelism"
    ours = genomics_dag(night, QUEUES, "ours", discover_pods_retry_number=5)
    assert f"expected_shard_duration={stated!r}," in ours and "fake_lengths('call')" in ours
    assert "shards_per_pod" not in ours, "the operator chooses, as for a user who states a duration"
    cncf = genomics_dag(night, QUEUES, "cncf", discover_pods_retry_number=5)
    assert "expected_shard_duration" not in cncf and "fake_lengths('call')" in cncf
    assert "shards_per_pod=" in risk_dag(night, QUEUES, "ours", discover_pods_retry_number=5)
    runs = [list(packs.shards_of_index(i)) for i in range(packs.index_count)]
    job = {
        "uid": "u", "name": "j", "dag_id": "night_genomics", "task_id": "sample.call", "map_index": 0,
        "shard_ids": list(range(call.shards)), "index_shards": runs, "created": 1.0, "complete": 9.0,
        "completed_indexes": f"0-{len(runs) - 2}", "failed": None,
    }  # fmt: skip
    ti = {"dag_id": "night_genomics", "task_id": "sample.call", "map_index": 0, "state": "success"}
    found = shard_accounting(night, {"pods": [], "jobs": [job], "task_instances": [ti]})
    assert found["shards_lost"] == len(runs[-1]) and found["completed_twice"] == 0  # the last pack's shards
