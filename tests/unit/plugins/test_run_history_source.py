"""The run history reads only the result fields a RunRecord needs, in SQL, not every result whole."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy.dialects import postgresql, sqlite

from airflow_kueue_provider.plugins.run_history_source import SUMMARY_FIELDS, stored_result, summary_query


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.dialect()], ids=["sqlite", "postgresql"])
def test_the_history_query_picks_the_summary_fields_out_of_the_stored_result(dialect: object) -> None:
    query = summary_query({"a"}, None, 500)
    names = [column.name for column in query.selected_columns]
    assert names[-len(SUMMARY_FIELDS) :] == list(SUMMARY_FIELDS)
    assert "value" not in names, "the stored result is never selected whole"
    sql = str(query.compile(dialect=dialect))  # type: ignore[arg-type]
    assert sql.count("cluster_queue") >= 1 and ("JSON_EXTRACT" in sql or "->" in sql), sql


def test_a_result_kept_in_object_storage_is_read_through_the_configured_xcom_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the common.io object-storage backend the row holds the result's path: the history reads the
    result itself, not the path (Airflow's XCom REST API would only stringify the path)."""
    backend = pytest.importorskip("airflow.providers.common.io.xcom.backend")
    monkeypatch.setenv("AIRFLOW__CORE__XCOM_BACKEND", f"{backend.__name__}.XComObjectStorageBackend")
    monkeypatch.setenv("AIRFLOW__COMMON_IO__XCOM_OBJECTSTORAGE_PATH", f"file://{tmp_path}")
    monkeypatch.setenv("AIRFLOW__COMMON_IO__XCOM_OBJECTSTORAGE_THRESHOLD", "0")
    result = {"cluster_queue": "team-a", "completions": 4, "succeeded": 4, "namespace": "a"}
    stored = backend.XComObjectStorageBackend.serialize_value(result, dag_id="d", run_id="r", task_id="t")
    assert "team-a" not in str(stored), "the row holds a reference, not the result"
    assert [p for p in tmp_path.rglob("*") if p.is_file()], "the result went to the object store"

    assert stored_result(SimpleNamespace(value=stored)) == result


def test_a_result_held_in_the_database_is_decoded_without_the_backend() -> None:
    result = {"cluster_queue": "team-a", "completions": 4}
    assert stored_result(SimpleNamespace(value=json.dumps(result))) == result


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.dialect()], ids=["sqlite", "postgresql"])
def test_the_nights_read_the_newest_dag_runs_then_only_their_results_with_the_outcome_keys(
    dialect: object,
) -> None:
    from airflow_kueue_provider.plugins.run_history_source import newest_runs_query

    for key in ("deadline_outcome", "forecast", "shard_history"):
        assert key in SUMMARY_FIELDS
    runs = str(newest_runs_query("nightly", 30).compile(dialect=dialect))
    assert "ORDER BY dag_run.run_after DESC" in runs and "LIMIT" in runs and " IN " not in runs, runs
    query = summary_query(["nightly"], None, 3000, run_ids=["r2", "r1"])
    sql = str(query.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
    assert "xcom.run_id IN ('r1', 'r2')" in sql and "LIMIT 3000" in sql, sql
