"""``shard_items=`` on ``KueueIndexedJobOperator`` and ``@task.kueue``: the items reach the pods' env (inline)
or as a reference (a blob); ``completions`` is taken from them or must match; literal items are checked when
the DAG is parsed, templated ones and XComs once rendered; a bad one fails naming the field."""

from __future__ import annotations

import json
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk import DAG, task

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.decorators.kueue_task import KueueDecoratedOperator, kueue_task
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.spec.shard_items import MAX_INLINE_ITEMS_BYTES, ShardItemsBlob
from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

IDENTITY = AirflowIdentity("dag", "task", "run-1")
QUEUE: dict[str, Any] = {"queue_name": "lq", "namespace": "batch", "image": "worker:1"}
SECRET = "kueue-items-secret-41c9"
REGIONS = ["eu-west", "us-east", "ap-south"]


def _op(**kwargs: Any) -> KueueIndexedJobOperator:
    return KueueIndexedJobOperator(task_id="task", **QUEUE, **kwargs)


def _env(job: dict[str, Any]) -> dict[str, str]:
    (main,) = job["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value") for e in main.get("env") or []}


def test_a_list_sets_completions_and_travels_as_compact_json() -> None:
    op = _op(shard_items=REGIONS, env={"MODE": "fast"})
    assert op.completions == 3, "completions left unset is the item count, from the DAG's parse on"
    job = op.build_manifest(IDENTITY)
    assert job["spec"]["completions"] == 3
    env = _env(job)
    assert json.loads(env["AIRFLOW_KUEUE_SHARD_ITEMS"]) == REGIONS and env["MODE"] == "fast"


def test_without_items_the_env_is_unchanged() -> None:
    assert "AIRFLOW_KUEUE_SHARD_ITEMS" not in _env(_op(completions=2).build_manifest(IDENTITY))


def test_completions_given_must_equal_the_item_count_at_parse_time() -> None:
    assert _op(shard_items=REGIONS, completions=3).completions == 3
    with pytest.raises(AirflowFailException, match="completions=5 but shard_items holds 3 items"):
        _op(shard_items=REGIONS, completions=5)


def test_over_64_kib_inline_is_refused_at_parse_time_pointing_at_the_blob_form() -> None:
    big = ["x" * 1000] * (MAX_INLINE_ITEMS_BYTES // 1000 + 1)
    with pytest.raises(AirflowFailException, match=r"task: shard_items: .*=ShardItemsBlob\("):
        _op(shard_items=big)


def test_an_item_holding_a_masked_secret_is_refused_naming_its_index_only() -> None:
    from airflow.sdk.log import mask_secret

    mask_secret(SECRET)
    with pytest.raises(AirflowFailException) as refused:
        _op(shard_items=["a", {"dsn": f"postgres://u:{SECRET}@db"}, "c"])
    assert "shard_items item 1 holds a secret" in str(refused.value) and SECRET not in str(refused.value)
    op = _op(shard_items=["a", "b", "{{ conn_password }}"], completions=3)  # rendered at run time
    with pytest.raises(AirflowFailException) as rendered:
        op.render_template_fields({"conn_password": SECRET})
    assert "shard_items item 2 holds a secret" in str(rendered.value) and SECRET not in str(rendered.value)


def test_a_rendered_jinja_string_becomes_the_list_and_sets_completions() -> None:
    op = _op(shard_items="{{ dag_run.conf['regions'] | tojson }}")
    assert op.completions == 1, "not known until rendered"
    op.render_template_fields({"dag_run": SimpleNamespace(conf={"regions": REGIONS})})
    assert op.completions == 3
    assert json.loads(_env(op.build_manifest(IDENTITY))["AIRFLOW_KUEUE_SHARD_ITEMS"]) == REGIONS


def test_templated_items_and_completions_that_disagree_fail_once_rendered() -> None:
    op = _op(shard_items="{{ params.regions | tojson }}", completions="{{ params.n }}")
    with pytest.raises(AirflowFailException, match="completions=2 but shard_items holds 3 items"):
        op.render_template_fields({"params": {"regions": REGIONS, "n": 2}})


def test_list_elements_are_rendered_one_by_one() -> None:
    op = _op(shard_items=["{{ ds }}/a.csv", "{{ ds }}/b.csv"])
    op.render_template_fields({"ds": "2026-12-05"})
    assert op.shard_items == ["2026-12-05/a.csv", "2026-12-05/b.csv"] and op.completions == 2


def test_an_upstream_output_is_an_upstream_and_its_list_the_items() -> None:
    with DAG("items_from_xcom", schedule=None, start_date=datetime(2026, 1, 1)):

        @task
        def list_files() -> list[str]:
            return REGIONS

        files = list_files()
        op = _op(shard_items=files, parallelism=2, shards_per_pod=2, checkpointing="kueue_blob_default")
    assert op.upstream_task_ids == {"list_files"}, "the XCom's task runs first"
    # the counts wait for the items: parallelism 2 > completions 1 is no error before the XCom is read

    class TaskInstance:
        def xcom_pull(self, **kwargs: Any) -> Any:
            return REGIONS if kwargs.get("task_ids") == "list_files" else None

    op.render_template_fields({"ti": TaskInstance()})
    assert op.shard_items == REGIONS and op.completions == 3
    assert op.build_manifest(IDENTITY)["spec"]["completions"] == 3


def test_a_blob_reference_needs_checkpointing_and_passes_only_the_reference() -> None:
    with pytest.raises(AirflowFailException, match="set checkpointing="):
        _op(shard_items=ShardItemsBlob("inputs/items.jsonl"), completions=4)
    op = _op(
        shard_items="blob://inputs/items.jsonl",
        completions=4,
        checkpointing=Checkpointing(conn_id="kueue_blob_default"),
    )
    env = _env(op.build_manifest(IDENTITY))
    assert env["AIRFLOW_KUEUE_SHARD_ITEMS_BLOB"] == "blob://inputs/items.jsonl"
    assert "AIRFLOW_KUEUE_SHARD_ITEMS" not in env


def test_a_kueue_task_gets_the_items_beside_its_function() -> None:
    with DAG("kueue_task_items", schedule=None, start_date=datetime(2026, 1, 1)):

        @kueue_task(checkpointing="kueue_blob_default", shard_items=REGIONS, **QUEUE)
        def load(shard: Any, scale: int) -> Any:
            return [shard.item, scale]

        op = load(2).operator  # type: ignore[attr-defined,call-arg,misc]
    assert isinstance(op, KueueDecoratedOperator) and op.completions == 3
    env = _env(op.build_manifest(IDENTITY))
    assert json.loads(env["AIRFLOW_KUEUE_SHARD_ITEMS"]) == REGIONS and "AIRFLOW_KUEUE_TASK_CALL" in env
