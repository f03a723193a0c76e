"""The operator's results from Airflow's database (the API server's own session), for the queue page's run
history and the task view's plot: the newest ``return_value`` XComs of the Kueue operators' task instances,
of the DAGs the user may read (or of the one task the task view, authorized for its DAG, shows).

A result the database holds as a reference (an object-storage XCom backend, ``[core] xcom_backend``, keeps
large values in a bucket and only their path in the row) is read through that backend's
``deserialize_value``, as a task reading the XCom would: Airflow's own XCom REST API only stringifies the row,
which would leave the history empty under such a backend."""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from .dashboard_data import KUEUE_OPERATORS
from .views.run_history import RunRecord
from .views.run_trends import RUNS_PER_TASK

log = logging.getLogger(__name__)

HISTORY_ROWS = 500
"""Results read per page: the newest, over every queue."""
NIGHT_ROWS = 3_000
"""Results read for one DAG's nights page: 30 nights of up to 100 Kueue task instances each."""
DAG_RUN_ROWS = 1_000
"""Results read for one DAG run's view (every Kueue task instance of it, mapped ones included)."""


def airflow_run_records(dag_ids: Collection[str] | None, limit: int = HISTORY_ROWS) -> list[RunRecord]:
    """``dag_ids``: the DAGs whose results may be shown (None: every DAG). A database that cannot be read
    leaves the history empty: the queues above it do not depend on it."""
    if dag_ids is not None and not dag_ids:
        return []
    return _read(dag_ids, None, limit)


def airflow_task_run_records(
    dag_id: str, task_id: str, map_index: int, limit: int = RUNS_PER_TASK
) -> list[RunRecord]:
    """The newest results of one task (the same map index) of one DAG, over its DAG runs."""
    return _read([dag_id], (task_id, map_index), limit)


def airflow_dag_night_records(dag_id: str, nights: int, limit: int = NIGHT_ROWS) -> list[RunRecord]:
    """The results of the Kueue tasks of the DAG's newest ``nights`` DAG runs (newest by ``run_after``),
    read from the database each time: every API server process, and one just restarted, shows the same."""
    return _read([dag_id], None, limit, nights=nights)


def airflow_dag_run_records(dag_id: str, run_id: str, limit: int = DAG_RUN_ROWS) -> list[RunRecord]:
    """The results of every Kueue task instance (each map index) of one DAG run."""
    return _read([dag_id], None, limit, run_ids=[run_id])


SUMMARY_FIELDS = (
    "cluster_queue",
    "completions",
    "namespace",
    "succeeded",
    "failed",
    "queued_seconds",
    "running_seconds",
    "evictions",
    "estimated_cost_usd",
    "admitted_parallelism",
    "attempt_figures",
    "deadline_outcome",
    "forecast",
    "shard_history",
)
"""The result keys a RunRecord reads. Only these leave the database (its JSON operators pick them out of the
stored result): a page of 500 results no longer ships and decodes every result whole (failed indexes, log
tails, per-attempt details)."""


def _read(
    dag_ids: Collection[str] | None,
    task: tuple[str, int] | None,
    limit: int,
    run_ids: Collection[str] | None = None,
    nights: int | None = None,
) -> list[RunRecord]:
    try:
        return _records(dag_ids, task, limit, run_ids, nights)
    except Exception:
        log.warning("Kueue queue page: cannot read the run history from Airflow's database", exc_info=True)
        return []


def summary_query(
    dag_ids: Collection[str] | None,
    task: tuple[str, int] | None,
    limit: int,
    run_ids: Collection[str] | None = None,
) -> Any:
    """The newest results' SUMMARY_FIELDS (each a JSON element of the stored value), never the value whole;
    ``run_ids``: of those DAG runs only."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    key = (XComModel.dag_id, XComModel.run_id, XComModel.task_id, XComModel.map_index)
    query = (
        select(*key, XComModel.timestamp, *(XComModel.value[f].label(f) for f in SUMMARY_FIELDS))
        .join(
            TaskInstance,
            (TaskInstance.dag_id == XComModel.dag_id)
            & (TaskInstance.run_id == XComModel.run_id)
            & (TaskInstance.task_id == XComModel.task_id)
            & (TaskInstance.map_index == XComModel.map_index),
        )
        .where(XComModel.key == "return_value", TaskInstance.operator.in_(sorted(KUEUE_OPERATORS)))
        .order_by(XComModel.timestamp.desc())
        .limit(limit)
    )
    if dag_ids is not None:
        query = query.where(XComModel.dag_id.in_(sorted(dag_ids)))
    if task is not None:
        query = query.where(XComModel.task_id == task[0], XComModel.map_index == task[1])
    if run_ids is not None:
        query = query.where(XComModel.run_id.in_(sorted(run_ids)))
    return query


def newest_runs_query(dag_id: str, nights: int) -> Any:
    """The run ids of the DAG's newest ``nights`` DAG runs (read first, then their results: MySQL takes no
    LIMIT in an IN subquery)."""
    from airflow.models.dagrun import DagRun
    from sqlalchemy import select

    return (
        select(DagRun.run_id)
        .where(DagRun.dag_id == dag_id)
        .order_by(DagRun.run_after.desc(), DagRun.id.desc())
        .limit(nights)
    )


def stored_result(row: Any) -> Any:
    """One XCom row's value: decoded from the database, or, when the row holds a reference rather than the
    result (not a mapping), through the configured XCom backend (which reads the referenced object)."""
    from airflow.models.xcom import XComModel

    value = XComModel.deserialize_value(row)
    if isinstance(value, dict):
        return value
    from airflow.sdk.execution_time.xcom import resolve_xcom_backend

    backend = resolve_xcom_backend()  # type: ignore[no-untyped-call]
    try:
        return backend.deserialize_value(row)
    except Exception:
        log.warning("Kueue pages: the XCom backend %s cannot read a result", backend.__name__, exc_info=True)
        return value


def _records(
    dag_ids: Collection[str] | None,
    task: tuple[str, int] | None,
    limit: int,
    run_ids: Collection[str] | None,
    nights: int | None,
) -> list[RunRecord]:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select, tuple_

    key = (XComModel.dag_id, XComModel.run_id, XComModel.task_id, XComModel.map_index)
    with create_session() as session:
        if nights is not None and dag_ids:
            run_ids = list(session.scalars(newest_runs_query(next(iter(dag_ids)), nights)))
            if not run_ids:
                return []
        rows = session.execute(summary_query(dag_ids, task, limit, run_ids)).all()
        # A result stored as an encoded JSON string (through XCom.serialize_value) has no fields to pick:
        # those rows, and only those, are read whole and decoded, so older results stay readable.
        whole = [tuple(row[:4]) for row in rows if row.cluster_queue is None]
        decoded = {}
        if whole:
            full = select(*key, XComModel.value).where(
                XComModel.key == "return_value", tuple_(*key).in_(whole)
            )
            decoded = {tuple(r[:4]): stored_result(r) for r in session.execute(full).all()}
    records = []
    for row in rows:
        ident = tuple(row[:4])
        value = decoded[ident] if ident in decoded else {f: getattr(row, f) for f in SUMMARY_FIELDS}
        record = RunRecord.from_result(
            row.dag_id, row.run_id, row.task_id, row.map_index, row.timestamp, value
        )
        if record is not None:
            records.append(record)
    return records
