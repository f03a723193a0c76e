"""``get_logs``: its plan (checked when the DAG is parsed), its bytes-per-second cap, the masker."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.hooks.cluster_target import ClusterTarget
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob
from airflow_kueue_provider.triggers.kueue_job import KueueJobTrigger
from airflow_kueue_provider.triggers.log_stream import BadLogParams, LogStream, LogStreamPlan


class Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, fmt: str, *args: Any) -> None:
        self.lines.append(fmt % args)

    warning = info


def _stream(plan: LogStreamPlan, log: Lines) -> LogStream:
    return LogStream(plan, ClusterTarget("kubernetes_default"), "ns", ("j", "u"), log)


@pytest.mark.parametrize(
    ("indexes", "rate", "said"),
    [
        ("0-10", 100, "selects 11 indexes; choose 1 to 10"),
        ("x", 100, "log_indexes 'x'"),
        ("0", 0, "log_bytes_per_second must be a positive integer"),
    ],
)
def test_bad_log_params_fail_when_the_dag_is_parsed(indexes: str, rate: int, said: str) -> None:
    with pytest.raises(BadLogParams, match=said):
        KueueIndexedJobOperator(
            task_id="t",
            queue_name="lq",
            image="i",
            get_logs=True,
            log_indexes=indexes,
            log_bytes_per_second=rate,
        )


def test_a_kind_with_child_jobs_refuses_get_logs_for_now() -> None:
    with pytest.raises(BadLogParams, match="runs its pods in child Jobs: not supported yet; remove get_logs"):
        KueueJobSetOperator(
            task_id="t",
            queue_name="lq",
            replicated_jobs=[KueueReplicatedJob(name="w", image="i")],
            get_logs=True,
        )


def test_the_plan_reaches_the_trigger_and_survives_serialization() -> None:
    plan = LogStreamPlan.parse("t", "0,3", 500)
    trigger = KueueJobTrigger(job_name="j", job_uid="u", namespace="ns", queue_name="lq", logs=plan.to_dict())
    _, kwargs = trigger.serialize()
    assert LogStreamPlan.from_dict(kwargs["logs"]) == plan
    assert "logs" not in KueueJobTrigger(job_name="j", namespace="ns", queue_name="lq").serialize()[1]


def test_the_cap_drops_and_counts_what_is_past_it() -> None:
    log = Lines()
    stream = _stream(LogStreamPlan("0", bytes_per_second=100), log)
    for n in range(10):
        stream._emit("index 0 p", f"line {n} ".encode() + b"x" * 40 + b"\n")
    shown = [line for line in log.lines if line.startswith("[index 0 p] line")]
    assert len(shown) == 2, log.lines  # 100 bytes of a burst: two lines of 48
    stream._note_dropped(
        force=True
    )  # the first drop is said at once, the rest at most every 10 s and at the end
    notes = [line for line in log.lines if line.endswith("bytes not shown (log_bytes_per_second=100)")]
    assert sum(int(line.split()[2]) for line in notes) == 8 * 48 and len(notes) == 2, log.lines


def test_each_line_goes_through_the_masker() -> None:
    from airflow.sdk.log import mask_secret

    mask_secret("s3cr3t-value-xyz")
    log = Lines()
    _stream(LogStreamPlan("0"), log)._emit("index 0 p", b"token=s3cr3t-value-xyz\n")
    assert log.lines == ["[index 0 p] token=***"]
