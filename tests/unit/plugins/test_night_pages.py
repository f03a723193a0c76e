"""The nights page, the whole-DAG-run page and the Kueue tab's forecast and deadline, through the app with
results read from a stand-in for Airflow's database (the cluster bed checks the real one)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import Depends
from fastapi.testclient import TestClient

from airflow_kueue_provider.plugins.app_settings import DashboardSettings
from airflow_kueue_provider.plugins.dashboard_app import create_app
from airflow_kueue_provider.plugins.dashboard_data import TaskInstanceFacts
from airflow_kueue_provider.plugins.read_caps import ReadCaps
from airflow_kueue_provider.plugins.route_access import dag_access
from airflow_kueue_provider.plugins.trend_pages import chart_id
from airflow_kueue_provider.plugins.views.run_history import RunRecord

from .views.test_nights import record


class NoJobs:
    kubernetes_conn_id = "conn"

    def task_instance_jobs(self, namespace: str | None, identity: Any) -> list[dict[str, Any]]:
        return []


DB: list[RunRecord] = [record(n) for n in range(4)] + [
    record(n, task_id="per_sample", map_index=i, evictions=i) for n in (2, 3) for i in range(2)
]
DB.append(record(3, dag_id="other"))
DB.append(record(3, margin=-20.0, error=185.0, task_id="late"))


def _client(
    asked: list[tuple[Any, ...]] | None = None,
    results: bool = True,
    caps: ReadCaps | None = None,
    db: Callable[[], list[RunRecord]] = lambda: DB,
) -> TestClient:
    log = asked if asked is not None else []
    reads = caps if caps is not None else ReadCaps(per_user=4, total=8)

    def nights(dag_id: str, count: int) -> list[RunRecord]:
        log.append(("nights", dag_id, count))
        return list(db())  # every DAG's: the route keeps the one it authorized

    def dag_run(dag_id: str, run_id: str) -> list[RunRecord]:
        log.append(("dag_run", dag_id, run_id))
        return list(db())

    def task_runs(dag_id: str, task_id: str, map_index: int) -> list[RunRecord]:
        return [r for r in db() if (r.dag_id, r.task_id, r.map_index) == (dag_id, task_id, map_index)]

    settings = DashboardSettings(
        NoJobs,  # type: ignore[arg-type]
        lambda: ["ns"],
        dependencies=[],
        task_access=[dag_access(authorize=lambda *_: True, user=Depends(lambda: "alice"))],
        queues_access=[],
        task_instances=lambda *key: TaskInstanceFacts("KueueIndexedJobOperator"),
        task_runs=task_runs,
        dag_nights=nights,
        dag_run_records=dag_run,
        results_access=lambda: results,
        stream_user=lambda: "alice",
        read_caps=lambda: reads,
    )
    return TestClient(create_app(settings))


def test_the_nights_page_plots_each_task_against_its_forecast_and_deadline() -> None:
    asked: list[tuple[Any, ...]] = []
    page = _client(asked).get("/nights", params={"dag_id": "nightly", "nights": 3})
    assert page.status_code == 200, page.text
    assert asked == [("nights", "nightly", 3)]
    html = page.text
    assert "other" not in html.replace("others", ""), "another DAG's results are left out"
    for task in ("late", "per_sample", "shards"):
        for kind in ("nights", "nights-cost", "nights-evictions"):
            assert f'id="{chart_id(kind, "nightly", task)}"' in html, (task, kind)
    for series in ("run time", "forecast", "deadline", "queue wait"):
        assert f'data-series="{series}"' in html, series
    assert "deadline missed by 20 s" in html and "deadline met with 4 min to spare" in html
    assert 'href="dag-run?dag_id=nightly&amp;run_id=scheduled__3"' in html
    assert html.count("<tr><td>") == 3 + 2 + 1, "shards: the newest 3 nights; per_sample 2; late 1"
    one = _client().get("/nights", params={"dag_id": "nightly", "task_id": "late"}).text
    assert 'data-nights="late"' in one and 'data-nights="shards"' not in one


def test_two_fresh_apps_over_the_same_results_show_the_same_nights() -> None:
    """Nothing is sampled or kept in the process: a restarted or second API server shows the same page."""
    query = {"dag_id": "nightly"}
    first = _client().get("/nights", params=query).text
    assert _client().get("/nights", params=query).text == first
    assert (
        _client().get("/api/nights", params=query).json() == _client().get("/api/nights", params=query).json()
    )


def test_bad_input_is_refused_early_naming_the_field() -> None:
    asked: list[tuple[Any, ...]] = []
    client = _client(asked)
    for nights in ("0", "91", "many"):
        answer = client.get("/nights", params={"dag_id": "nightly", "nights": nights})
        assert answer.status_code == 422 and "nights" in answer.text, answer.text
    assert client.get("/nights", params={"dag_id": ["a", "b"]}).status_code == 422
    assert client.get("/dag-run", params={"dag_id": "nightly"}).status_code == 422, "run_id is required"
    assert asked == [], "nothing was read"


def test_without_the_dags_xcom_permission_nothing_is_read_and_the_page_says_why() -> None:
    asked: list[tuple[Any, ...]] = []
    client = _client(asked, results=False)
    for path, params in (("/nights", {}), ("/dag-run", {"run_id": "scheduled__3"})):
        page = client.get(path, params={"dag_id": "nightly", **params})
        assert page.status_code == 200 and "Ask for the XCom read permission of this DAG" in page.text
        assert "scheduled__3" not in page.text.split("<h2>")[1].split("</h2>")[1] or path == "/dag-run"
    assert client.get("/api/nights", params={"dag_id": "nightly"}).json()["tasks"] == []
    assert asked == []


def test_the_reads_count_against_the_users_read_caps() -> None:
    caps = ReadCaps(per_user=1, total=5)
    client = _client(caps=caps)
    release = caps.acquire("alice")  # a read of hers still running
    try:
        for path, params in (("/nights", {}), ("/api/nights", {}), ("/dag-run", {"run_id": "r"})):
            answer = client.get(path, params={"dag_id": "nightly", **params})
            assert answer.status_code == 429 and "ui_reads_per_user" in answer.text, path
    finally:
        release()
    assert client.get("/nights", params={"dag_id": "nightly"}).status_code == 200


def test_the_dag_run_page_lists_every_task_instance_with_the_totals() -> None:
    asked: list[tuple[Any, ...]] = []
    page = _client(asked).get("/dag-run", params={"dag_id": "nightly", "run_id": "scheduled__3"})
    assert page.status_code == 200 and asked == [("dag_run", "nightly", "scheduled__3")]
    html = page.text
    assert "4 Kueue task instances" in html and "shards 32/32 done, 0 failed" in html
    assert "deadline missed: 3 met, 1 missed; the closest missed by 20 s" in html
    assert "cost $5.00" in html and "1 eviction<" in html
    assert "the last to finish finished 3 min later than forecast" in html
    for index in (0, 1):
        assert f"per_sample [{index}]" in html
        assert f"task_id=per_sample&amp;map_index={index}" in html
    assert 'href="nights?dag_id=nightly"' in html
    json = _client().get("/api/dag-run", params={"dag_id": "nightly", "run_id": "scheduled__3"}).json()
    assert json["totals"]["deadlines_missed"] == 1 and len(json["rows"]) == 4 and json["capped"] is False
    none = _client().get("/dag-run", params={"dag_id": "nightly", "run_id": "nope"}).text
    assert "has no Kueue task result" in none


def test_the_kueue_tab_shows_the_forecast_how_far_off_it_was_and_the_deadline() -> None:
    task = {"dag_id": "nightly", "run_id": "scheduled__3", "task_id": "late", "map_index": "{MAP_INDEX}"}
    html = _client().get("/task", params=task).text
    assert (
        "Forecast at submit (2026-12-04 02:00 UTC, from 2 earlier nights, 2 nights of shard history)" in html
    )
    assert "start 02:00:50, finish 02:07:55 UTC (between 02:02:55 and 02:12:55)" in html
    assert "It finished 3 min later than forecast at 02:11:00 UTC." in html
    assert "Deadline 2026-12-04 02:10:40 UTC: missed by 20 s." in html
    assert 'href="dag-run?dag_id=nightly&amp;run_id=scheduled__3"' in html
    assert 'href="nights?dag_id=nightly&amp;task_id=late"' in html


def test_an_older_result_shows_no_forecast_or_deadline_on_the_tab() -> None:
    older = [record(3, margin=None, error=None)]
    task = {"dag_id": "nightly", "run_id": "scheduled__3", "task_id": "shards", "map_index": "-1"}
    html = _client(db=lambda: older).get("/task", params=task).text
    assert "Forecast at submit" not in html and "Deadline " not in html
    assert "Every Kueue task of this DAG run" in html, "the links stay"


def test_cost_ticks_have_no_exponent_and_every_value_is_escaped() -> None:
    from airflow_kueue_provider.plugins.night_pages import usd_tick

    assert [usd_tick(v) for v in (0, 5e-05, 0.00015, 0.25, 2.5, 1200)] == [
        "0", "0.00005", "0.00015", "0.25", "2.5", "1,200",
    ]  # fmt: skip
    hostile = [record(1, task_id="<b>t</b>"), record(2, task_id="<b>t</b>")]
    html = _client(db=lambda: hostile).get("/nights", params={"dag_id": "nightly"}).text
    assert "&lt;b&gt;t&lt;/b&gt;" in html and "<b>t" not in html


def test_a_dag_run_read_that_hit_its_row_cap_says_so() -> None:
    from airflow_kueue_provider.plugins.run_history_source import DAG_RUN_ROWS

    many = [record(3, task_id="per_sample", map_index=i) for i in range(DAG_RUN_ROWS)]
    params = {"dag_id": "nightly", "run_id": "scheduled__3"}
    page = _client(db=lambda: many).get("/dag-run", params=params).text
    assert f"{DAG_RUN_ROWS} Kueue task instances" in page and "the read is capped" in page
    assert "the read is capped" not in _client().get("/dag-run", params=params).text
