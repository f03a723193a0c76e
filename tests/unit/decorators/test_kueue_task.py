"""@task.kueue: the decorated function and its arguments reach the pods' runner, which calls it per shard and
records each JSON return value; bad use fails when the DAG is parsed or before anything is created."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.decorators.kueue_task import KueueDecoratedOperator, kueue_task
from airflow_kueue_provider.get_provider_info import get_provider_info
from airflow_kueue_provider.kueue.names import TASK_RUNNER_MODULE
from airflow_kueue_provider.worker import task_function

QUEUE = {"queue_name": "lq", "namespace": "risk", "image": "risk-shard:1", "completions": 4}


class FakeShard:
    def __init__(self, shard_id: int) -> None:
        self.shard_id = shard_id
        self.done: dict[str, Any] | None = None

    def mark_done(self, output: dict[str, Any]) -> None:
        self.done = output


def _operator(**extra: Any) -> KueueDecoratedOperator:
    with DAG("kueue_task_dag", schedule=None, start_date=datetime(2026, 1, 1)):

        @kueue_task(checkpointing="kueue_blob_default", **QUEUE, **extra)
        def price(shard: Any, paths: int, scale: float = 1.0) -> float:
            import math

            return round(math.sqrt(shard.shard_id * paths) * scale, 6)

        return price(paths=100, scale=2.0).operator  # type: ignore[no-any-return]


def test_the_pods_runner_calls_the_function_per_shard_with_its_arguments() -> None:
    op = _operator()
    assert isinstance(op, KueueDecoratedOperator) and op.cmds == ["python", "-m", TASK_RUNNER_MODULE]
    environ = {e["name"]: e["value"] for e in op._payload_env()}
    function, args, kwargs = task_function.load_task(environ)
    assert (args, kwargs) == ([], {"paths": 100, "scale": 2.0})
    shard = FakeShard(4)
    task_function.run_shard(function, shard, args, kwargs)  # type: ignore[arg-type]
    assert shard.done == {"result": 40.0}, "the return value is the shard's done record"
    assert (
        "@kueue_task" not in environ
        and "def price" in task_function.base64.b64decode(environ["AIRFLOW_KUEUE_TASK_SOURCE"]).decode()
    )


def test_a_return_value_that_is_not_json_fails_its_shard_saying_so() -> None:
    def bad(shard: Any) -> object:
        return object()

    with pytest.raises(TypeError, match="shard 2: bad returned object, which is not JSON"):
        task_function.run_shard(bad, FakeShard(2), [], {})  # type: ignore[arg-type]


def test_a_pod_without_the_task_variables_exits_2_naming_them() -> None:
    assert task_function.main({}) == task_function.EXIT_BAD_PAYLOAD


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"cmds": ["python"]}, "cmds= is the task's own"),
        ({"arguments": ["x"]}, "arguments= is the task's own"),
    ],
)
def test_bad_use_fails_when_the_dag_is_parsed(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(AirflowFailException, match=message):
        _operator(**extra)


def test_checkpointing_is_required() -> None:
    with DAG("kueue_task_dag", schedule=None, start_date=datetime(2026, 1, 1)):

        @kueue_task(**QUEUE)
        def f(shard: Any) -> int:
            return 1

        with pytest.raises(AirflowFailException, match="set checkpointing="):
            f()


def test_arguments_that_are_not_json_fail_before_anything_is_created() -> None:
    with DAG("kueue_task_dag", schedule=None, start_date=datetime(2026, 1, 1)):

        @kueue_task(checkpointing="kueue_blob_default", **QUEUE)
        def f(shard: Any, when: Any) -> int:
            return 1

        op = f(when=datetime(2026, 1, 1)).operator
    with pytest.raises(AirflowFailException, match="must be JSON values"):
        op._payload_env()


def test_registered_as_a_provider_task_decorator() -> None:
    (decorator,) = get_provider_info()["task-decorators"]
    assert decorator == {
        "name": "kueue",
        "class-name": "airflow_kueue_provider.decorators.kueue_task.kueue_task",
    }


def test_the_function_takes_the_shard_first() -> None:
    with DAG("kueue_task_dag", schedule=None, start_date=datetime(2026, 1, 1)):

        @kueue_task(checkpointing="kueue_blob_default", **QUEUE)
        def no_shard() -> int:
            return 1

        with pytest.raises(AirflowFailException, match=r"first parameter receives the shard"):
            no_shard()


def test_every_job_the_task_builds_carries_the_function() -> None:
    """Not only the Job execute submits: a retry's or a spill's Job is built by build_manifest too."""
    from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity

    job = _operator().build_manifest(AirflowIdentity("kueue_task_dag", "price", "run-1"))
    (main,) = job["spec"]["template"]["spec"]["containers"]
    names = {e["name"] for e in main["env"]}
    assert {"AIRFLOW_KUEUE_TASK_SOURCE", "AIRFLOW_KUEUE_TASK_CALL"} <= names
    assert main["command"] == ["python", "-m", TASK_RUNNER_MODULE]
