"""Airflow loads the UI plugin through its entry point, with its app and views; the pages escape values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.plugins.dashboard_data import JobPanel, LiveState
from airflow_kueue_provider.plugins.dashboard_pages import grid_html, queues_page, task_page
from airflow_kueue_provider.plugins.views.admission_timeline import TimelineStep
from airflow_kueue_provider.plugins.views.index_grid import IndexGrid
from airflow_kueue_provider.plugins.views.queue_overview import QueueRow, ResourceUse

_PLUGIN_CHECK = """
import json
from airflow import plugins_manager
if hasattr(plugins_manager, "_get_plugins"):  # Airflow 3.2+
    plugins, errors = plugins_manager._get_plugins()
    apps, _ = plugins_manager.get_fastapi_plugins()
    views, _ = plugins_manager._get_ui_plugins()
else:  # Airflow 3.1
    plugins_manager.ensure_plugins_loaded()
    plugins_manager.initialize_fastapi_plugins()
    plugins_manager.initialize_ui_plugins()
    plugins, errors = plugins_manager.plugins, dict(plugins_manager.import_errors)
    apps = plugins_manager.fastapi_apps
    views = plugins_manager.external_views
print(json.dumps({
    "plugins": [p.name for p in plugins],
    "errors": errors,
    "apps": [[a["name"], a["url_prefix"]] for a in apps],
    "views": {v["url_route"]: [v["destination"], v["href"]] for v in views if v.get("url_route")},
}))
"""


def test_airflow_loads_the_plugin_through_its_entry_point(tmp_path: Path) -> None:
    # A fresh interpreter outside the source tree, as Airflow's API server runs: inside it, the
    # source tree's egg-info would list the entry point a second time.
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", _PLUGIN_CHECK],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = json.loads(out.strip().splitlines()[-1])
    assert "kueue" in found["plugins"] and not found["errors"]
    assert ["Kueue dashboard", "/kueue"] in found["apps"]
    assert found["views"]["kueue-queues"] == ["nav", "kueue/queues"]
    destination, href = found["views"]["kueue-task"]
    assert destination == "task_instance" and "run_id={RUN_ID}" in href


def test_pages_escape_names_and_messages() -> None:
    row = QueueRow("ns", "<lq>", "cq", None, True, 1, 0, 0, 1, (ResourceUse("f", "cpu", "4", "2", "1"),))
    html = queues_page([row])
    assert "&lt;lq&gt;" in html and "<lq>" not in html and "+1 borrowed" in html
    step = TimelineStep(datetime(2026, 11, 30, tzinfo=UTC), "evicted", "<script>x</script>", "Workload")
    live = LiveState("job", "running", None, IndexGrid(3, IndexSet(), IndexSet(), IndexSet()), False)
    panel = JobPanel("ns", "job", "1", "wl", "cq", live, [step])
    html = task_page("dag / task / run", [panel])
    assert "&lt;script&gt;x&lt;/script&gt;" in html and "<script>x" not in html
    live_page = task_page("t", [panel], stream='api/task/stream?dag_id="><script>&job=job')
    assert 'data-stream="api/task/stream?dag_id=&#34;&gt;&lt;script&gt;&amp;job=job"' in live_page
    assert 'data-part="summary:job"' in live_page and 'data-part="grid:job"' in live_page


def test_small_grids_draw_cells_big_ones_draw_bands() -> None:
    small = IndexGrid(4, IndexSet.parse("0,1"), IndexSet.parse("3"), IndexSet())
    assert grid_html(small).count('class="cell ') == 4
    big = IndexGrid(100_000, IndexSet.parse("0-49999"), IndexSet(), IndexSet())
    html = grid_html(big)
    assert 'class="cell ' not in html and html.count("width:50.0000%") == 2


def test_the_unfilled_map_index_placeholder_means_an_unmapped_task() -> None:
    import pytest
    from fastapi import HTTPException

    from airflow_kueue_provider.plugins.task_routes import parse_map_index

    assert parse_map_index("{MAP_INDEX}") == -1, "Airflow 3.3 leaves it unfilled for unmapped tasks"
    assert parse_map_index("") == parse_map_index("-1") == -1
    assert parse_map_index("3") == 3
    for bad in ("-2", "x", "{RUN_ID}"):
        with pytest.raises(HTTPException) as err:
            parse_map_index(bad)
        assert err.value.status_code == 422


def test_the_run_history_shows_only_the_dags_the_user_may_read() -> None:
    from fastapi.testclient import TestClient

    from airflow_kueue_provider.plugins.app_settings import DashboardSettings
    from airflow_kueue_provider.plugins.dashboard_app import create_app
    from airflow_kueue_provider.plugins.views.run_history import RunRecord

    class NoQueues:
        def list_local_queues(self, namespace: str | None) -> list[dict[str, object]]:
            return []

        def list_cluster_queues(self) -> list[dict[str, object]]:
            return []

    asked: list[object] = []
    result = {
        "cluster_queue": "spot",
        "completions": 2,
        "succeeded": 2,
        "namespace": "ns",
        "queued_seconds": 3,
    }

    def records(dag_ids: object) -> list[RunRecord]:
        asked.append(dag_ids)
        at = datetime(2026, 12, 1, tzinfo=UTC)
        found = [RunRecord.from_result(d, "r", "t", -1, at, result) for d in ("a", "<b>")]
        return [r for r in found if r and (dag_ids is None or r.dag_id in dag_ids)]  # type: ignore[operator]

    app = create_app(
        DashboardSettings(
            NoQueues,  # type: ignore[arg-type]
            lambda: ["ns"],
            dependencies=[],
            task_access=[],
            queues_access=[],
            run_records=records,
            readable_dags=lambda: {"a"},
        )
    )
    page = TestClient(app).get("/queues")
    assert page.status_code == 200 and asked == [{"a"}]
    assert "ClusterQueue spot" in page.text and "&lt;b&gt;" not in page.text and "<td>a</td>" in page.text
    history = TestClient(app).get("/api/queues").json()["history"]
    assert [[r["dag_id"] for r in h["runs"]] for h in history] == [["a"]]


def test_the_task_view_shows_the_deadline_the_eta_and_the_escalations() -> None:
    from datetime import timedelta

    from airflow_kueue_provider.kueue.progress.eta import Estimate
    from airflow_kueue_provider.plugins.dashboard_pages import summary_html

    deadline = datetime(2026, 12, 2, 7, tzinfo=UTC)
    eta = Estimate(deadline + timedelta(minutes=12), timedelta(minutes=3))
    live = LiveState(
        "j",
        "running 10/100 done",
        eta,
        IndexGrid(100, IndexSet(), IndexSet(), IndexSet()),
        False,
        deadline,
        ({"step": "raise_priority", "detail": "urgent", "at": "2026-12-02T06:41:07+00:00"},),
    )
    html = summary_html(live)
    assert "deadline 2026-12-02 07:00 UTC (ETA 12 min after)" in html
    assert "escalated: raise_priority urgent at 06:41:07" in html


def test_a_live_view_records_each_reading_in_its_clock_and_estimates_from_it() -> None:
    from airflow_kueue_provider.kueue.progress.eta import FinishClock
    from airflow_kueue_provider.plugins.dashboard_data import live_state

    def job(done: str, active: int) -> dict[str, object]:
        status = {"completedIndexes": done, "active": active, "startTime": "2026-12-01T01:00:00Z"}
        return {"metadata": {"name": "j", "namespace": "n"}, "spec": {"completions": 100}, "status": status}

    clock = FinishClock(100)
    t0 = datetime(2026, 12, 1, 1, 0, tzinfo=UTC).timestamp()
    for i, done in enumerate(("0-9", "0-19", "0-29", "0-39")):
        state = live_state(job(done, 10), None, t0 + 60 + 10 * i, clock)
    assert [n for _, n in clock._readings] == [10, 20, 30, 40]
    # 10 indexes every 10 s: the other 60 in 60 s, from the clock's own rate.
    assert state.eta is not None and state.eta.at.timestamp() == t0 + 90 + 60
