"""The run history reads only the result fields a RunRecord needs, in SQL, not every result whole."""

from __future__ import annotations

import pytest
from sqlalchemy.dialects import postgresql, sqlite

from airflow_kueue_provider.plugins.run_history_source import SUMMARY_FIELDS, summary_query


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.dialect()], ids=["sqlite", "postgresql"])
def test_the_history_query_picks_the_summary_fields_out_of_the_stored_result(dialect: object) -> None:
    query = summary_query({"a"}, None, 500)
    names = [column.name for column in query.selected_columns]
    assert names[-len(SUMMARY_FIELDS) :] == list(SUMMARY_FIELDS)
    assert "value" not in names, "the stored result is never selected whole"
    sql = str(query.compile(dialect=dialect))  # type: ignore[arg-type]
    assert sql.count("cluster_queue") >= 1 and ("JSON_EXTRACT" in sql or "->" in sql), sql
