"""The UI pages' templates: shipped as package data, autoescaped, and no text from a name, a note, a message
or a label can inject markup into any page or live part (every text field set to a hostile string)."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatch
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import jinja2
import pytest
from fastapi.testclient import TestClient

from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.kinds import ChildOf
from airflow_kueue_provider.kueue.kinds.jobset import JOBSET
from airflow_kueue_provider.kueue.progress.eta import Estimate
from airflow_kueue_provider.plugins import dashboard_pages, page_templates, svg_chart, trend_pages
from airflow_kueue_provider.plugins.app_settings import DashboardSettings
from airflow_kueue_provider.plugins.dashboard_app import create_app
from airflow_kueue_provider.plugins.dashboard_data import JobPanel, LiveState, TaskInstanceFacts
from airflow_kueue_provider.plugins.views.admission_timeline import TimelineStep
from airflow_kueue_provider.plugins.views.index_grid import IndexGrid
from airflow_kueue_provider.plugins.views.queue_overview import QueueRow, ResourceUse
from airflow_kueue_provider.plugins.views.run_history import QueueHistory, RunRecord, queue_histories
from airflow_kueue_provider.plugins.views.run_trends import QueueSample, QuotaUse, task_trend

REPO = Path(__file__).resolve().parents[3]
TEMPLATES = REPO / "airflow_kueue_provider" / "plugins" / "templates"
HOSTILE = ("<script>alert(1)</script>", "\"'><img src=x onerror=alert(1)>")
T0 = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)


# --- the environment ---------------------------------------------------------------------------------------


def test_the_templates_are_found_through_the_package_loader_and_shipped_as_package_data() -> None:
    loader = jinja2.PackageLoader("airflow_kueue_provider.plugins", "templates")
    found = set(loader.list_templates())
    pages = {"base.html", "queues.html", "task.html", "error.html"}
    assert pages | {"parts.html", "trends.html", "history.html", "chart.svg"} <= found, found
    assert found == {p.name for p in TEMPLATES.iterdir() if p.is_file()}
    env = jinja2.Environment(loader=loader, autoescape=True)
    for name in found:
        env.get_template(name)  # each one parses
    # pip installs (the wheel, the Airflow image) ship only what [tool.setuptools.package-data] names
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["airflow_kueue_provider.plugins"]
    assert all(any(fnmatch(f"templates/{name}", g) for g in globs) for name in found), globs


def test_the_environment_escapes_every_template_and_refuses_an_undefined_name() -> None:
    env = page_templates.ENV
    assert env.autoescape is True, "every template, whatever its name (chart.svg too)"
    assert env.from_string("{{ x }}").render(x=HOSTILE[1]) == (
        "&#34;&#39;&gt;&lt;img src=x onerror=alert(1)&gt;"
    )
    assert env.undefined is jinja2.StrictUndefined
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ nothing }}").render()


def test_no_template_marks_a_value_safe_or_turns_escaping_off() -> None:
    for path in TEMPLATES.iterdir():
        text = path.read_text()
        assert not re.search(r"\|\s*safe\b|autoescape\s+false|Markup", text), path.name


def test_the_page_follows_airflows_colour_mode_before_it_paints() -> None:
    html = dashboard_pages.error_page("x")
    head = html[: html.index("<body>")]
    assert "localStorage.getItem(k)" in head and f'k="{page_templates.AIRFLOW_THEME_KEY}"' in head
    assert "setAttribute('data-theme'" in head and "addEventListener('storage'" in head
    assert ":root[data-theme=dark]{" in head and "prefers-color-scheme: dark" in head
    assert head.index("<script>") < head.index("<style>"), "the attribute is set before the CSS applies"


# --- hostile text in every field ---------------------------------------------------------------------------


class _Dom(HTMLParser):
    """Every element, its attributes, and the text (decoded), as a browser would see them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self.text.extend(v for _, v in attrs if v)
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.scripts if self._in_script else self.text).append(data)


def assert_inert(html: str, hostile: str) -> None:
    """No markup from ``hostile``, which must still be there as text (so it went through the escaping)."""
    assert "<script>alert" not in html and "<img" not in html, html
    dom = _Dom()
    dom.feed(html)
    dom.close()
    assert not [t for t, _ in dom.tags if t == "img"]
    events = [(t, a) for t, attrs in dom.tags for a in attrs if a.startswith("on")]
    assert not events, events
    assert not [s for s in dom.scripts if "alert" in s], "only the page's own scripts"
    assert any(hostile in t for t in dom.text), "the hostile text is shown (escaped), not dropped"


def _records(x: str) -> list[RunRecord]:
    def record(day: int, map_index: int) -> RunRecord:
        result = {
            "cluster_queue": f"spot{x}", "namespace": f"ns{x}", "completions": 4, "succeeded": 3,
            "failed": 1, "queued_seconds": 30.0 * day, "running_seconds": 300.0 + day, "evictions": 1,
            "estimated_cost_usd": 0.5,
        }  # fmt: skip
        found = RunRecord.from_result(
            f"dag{x}", f"run{day}{x}", f"task{x}", map_index, T0 + timedelta(days=day), result
        )
        assert found is not None
        return found

    return [record(day, -1) for day in range(6)] + [record(day, 2) for day in range(2)]


def _rows(x: str) -> list[QueueRow]:
    usage = (ResourceUse(f"flavor{x}", f"cpu{x}", f"4{x}", f"6{x}", f"2{x}"),)
    return [
        QueueRow(f"ns{x}", f"lq{x}", f"spot{x}", f"cohort{x}", True, 1, 0, 2, 3, usage, 1),
        QueueRow(f"ns{x}", f"lq2{x}", f"gpu{x}", None, False, 0, 0, 0, None, ()),
    ]


def _samples(x: str) -> dict[str, list[QueueSample]]:
    t = T0.timestamp()
    quota = (QuotaUse(f"flavor{x}", f"cpu{x}", 3.0, 4.0),)
    return {f"spot{x}": [QueueSample(t + 60 * i, i, 0, 1, quota) for i in range(4)]}


def _panel(x: str) -> JobPanel:
    eta = Estimate(T0 + timedelta(minutes=9), timedelta(minutes=2))
    grid = IndexGrid(6, IndexSet.parse("0-2"), IndexSet.parse("3"), IndexSet.parse("4"))
    escalation = {"step": f"raise_priority{x}", "detail": f"urgent{x}", "at": "2026-11-01T02:03:04+00:00"}
    live = LiveState(f"job{x}", f"running{x}", eta, grid, False, T0, (escalation,))
    steps = [TimelineStep(T0, f"evicted{x}", f"note{x}", f"Workload{x}", True)]
    ids = (f"ns{x}", f"job{x}", f"1{x}", f"wl{x}", f"cq{x}")
    return JobPanel(*ids, live, steps, f"worker{x}", ChildOf(JOBSET, f"js{x}", f"rj{x}"), f"placement{x}")


def _chart(x: str) -> str:
    t = T0.timestamp()
    series = [
        svg_chart.Series(f"run{x}", [svg_chart.Point(t, 1.0, f"note{x}"), svg_chart.Point(t + 600, 2.0)]),
        svg_chart.Series(f"d{x}", [svg_chart.Point(t, 2.0, f"tip{x}")], 1, marker="diamond"),
        svg_chart.Series(f"w{x}", [svg_chart.Point(t, 0.5, f"wait{x}")], 2, line="none", marker="square"),
    ]
    return svg_chart.time_chart(svg_chart.chart_view(
        f"id{x}", f"title{x}", f"desc{x}", series, f"y{x}", lambda v: f"{v:g}{x}",
        reference=svg_chart.Reference(1.5, f"label{x}"),
    ))  # fmt: skip


PAGES: dict[str, Callable[[str], str]] = {
    "queues_page": lambda x: dashboard_pages.queues_page(
        _rows(x), queue_histories(_records(x)), f"api/queues/stream?{x}", _samples(x), T0.timestamp() + 600
    ),
    "queues_part": lambda x: dashboard_pages.queues_part(_rows(x), _samples(x), T0.timestamp() + 600),
    "history_html": lambda x: dashboard_pages.history_html(queue_histories(_records(x))),
    "queues_table": lambda x: dashboard_pages.queues_table(_rows(x)),
    "task_page": lambda x: dashboard_pages.task_page(
        f"dag{x} / task{x} / run{x}",
        [_panel(x)],
        None,
        f"api/task/stream?dag_id={x}&job=job{x}",
        task_trend(_records(x), f"dag{x}", f"task{x}", -1),
        log_query=f"dag_id={x}&run_id=r",
    ),
    "task_page_without_a_job": lambda x: dashboard_pages.task_page(
        f"title{x}", [], TaskInstanceFacts(f"Operator{x}"), f"stream{x}"
    ),
    "summary_html": lambda x: dashboard_pages.summary_html(_panel(x).live),
    "error_page": lambda x: dashboard_pages.error_page(f"the cluster answered{x}"),
    "task_trend_html": lambda x: trend_pages.task_trend_html(
        task_trend(_records(x), f"dag{x}", f"task{x}", 2)
    ),
    "task_chart": lambda x: trend_pages.task_chart(task_trend(_records(x), f"dag{x}", f"task{x}", -1)),
    "queue_runs_chart": lambda x: trend_pages.queue_runs_chart(QueueHistory(f"spot{x}", tuple(_records(x)))),
    "queue_over_time_html": lambda x: trend_pages.queue_over_time_html(
        f"spot{x}", _samples(x)[f"spot{x}"], T0.timestamp() + 600
    ),
    "queue_over_time_html_without_samples": lambda x: trend_pages.queue_over_time_html(
        f"spot{x}", [], T0.timestamp()
    ),
    "queues_over_time_html": lambda x: trend_pages.queues_over_time_html(
        [f"spot{x}", f"gpu{x}"], _samples(x), T0.timestamp() + 600
    ),
    "time_chart": _chart,
}


@pytest.mark.parametrize("hostile", HOSTILE)
@pytest.mark.parametrize("name", sorted(PAGES))
def test_hostile_text_in_every_field_stays_text(name: str, hostile: str) -> None:
    html = PAGES[name](hostile)
    assert type(html) is str
    assert_inert(html, hostile)


@pytest.mark.parametrize("name", ["time_chart", "task_chart", "queue_runs_chart"])
def test_a_chart_with_hostile_text_is_well_formed_svg(name: str) -> None:
    root = ElementTree.fromstring(PAGES[name](HOSTILE[1]))  # every string escaped, or this fails
    texts = [e.text or "" for e in root.iter() if e.text]
    assert any(HOSTILE[1] in t for t in texts)


def test_the_live_parts_of_a_job_with_a_hostile_name_keep_their_ids() -> None:
    """The stream finds a part by its ``data-part``: escaped in the page, the same value in the DOM."""
    dom = _Dom()
    dom.feed(PAGES["task_page"](HOSTILE[1]))
    parts = [attrs["data-part"] for _, attrs in dom.tags if "data-part" in attrs]
    job = f"job{HOSTILE[1]}"
    assert parts == [dashboard_pages.part_id("summary", job), dashboard_pages.part_id("grid", job)]
    big = IndexGrid(3_000, IndexSet.parse("0-1999"), IndexSet(), IndexSet())
    assert 'class="bands"' in dashboard_pages.grid_html(big)


class _Hook:
    """A cluster with no Job, Kueue queues with hostile names."""

    kubernetes_conn_id = "test"

    def task_instance_jobs(self, namespace: str | None, identity: Any) -> list[dict[str, Any]]:
        return []

    def list_local_queues(self, namespace: str | None) -> list[dict[str, Any]]:
        meta = {"namespace": "ns", "name": HOSTILE[0]}
        return [{"metadata": meta, "spec": {"clusterQueue": HOSTILE[1]}, "status": {}}]

    def list_cluster_queues(self) -> list[dict[str, Any]]:
        return [{"metadata": {"name": HOSTILE[1]}, "spec": {"cohort": HOSTILE[0]}, "status": {}}]


def test_the_app_escapes_the_ids_of_the_url_and_the_clusters_names() -> None:
    from airflow_kueue_provider.plugins.views.run_trends import QueueSampleRing

    app = create_app(
        DashboardSettings(
            _Hook,  # type: ignore[arg-type]
            lambda: ["ns"],
            dependencies=[],
            task_access=[],
            queues_access=[],
            task_instances=lambda *a: TaskInstanceFacts("KueueIndexedJobOperator"),
            task_runs=lambda *a: [],
            run_records=lambda d: [],
            queue_samples=QueueSampleRing(),
        )
    )
    client = TestClient(app)
    ids = {"dag_id": HOSTILE[0], "run_id": HOSTILE[1], "task_id": HOSTILE[1], "map_index": "-1"}
    task = client.get("/task", params=ids)
    assert task.status_code == 200
    assert_inert(task.text, f"{HOSTILE[0]} / {HOSTILE[1]} / {HOSTILE[1]}")
    queues = client.get("/queues")
    assert queues.status_code == 200
    assert_inert(queues.text, HOSTILE[1])
