"""The Kueue tab in the real Airflow UI, driven in headless Chromium (Debian's ``chromium``, via Playwright).

One ``airflow api-server`` and one browser for the module. The server runs under a base path (``/airflow``,
as behind a reverse proxy), so the tab's URL must be relative to Airflow's base URL to work at all. A DAG
with an unmapped and a mapped KueueIndexedJobOperator task, a KueueJobSetOperator task and an EmptyOperator
runs once with
``dag.test()`` on the local cluster, while the server and the browser start. The browser logs in through
the UI's login form; each test opens a task instance's page, clicks its "Kueue" tab, reads the page inside
the tab's iframe and saves a screenshot to ``.test-reports/screenshots/<test>.png``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import quote

import httpx
import pytest
from playwright.sync_api import Browser, FrameLocator, Locator, Page

from airflow_kueue_provider.kueue.names import MAP_INDEX_LABEL, REPLICATED_JOB_LABEL, TASK_ID_LABEL
from airflow_kueue_provider.plugins.trend_pages import chart_id
from devcluster.manifests import TOPOLOGY_NAME

from ..airflow_runner import AirflowHome
from ..browser import SCREENSHOTS, chromium, log_in, needs_chromium, screenshot
from ..cluster import Cluster, KueueEnv, create_kueue_env, delete_kueue_env
from .test_api_server import _login, start_api_server

DAG_ID = "kueue_tab"
BASE_PATH = "/airflow"

DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob

common = dict(
    namespace={namespace!r}, queue_name={queue!r}, image="example.invalid/shard:1",
    resources={{"requests": {{"cpu": "250m", "memory": "256Mi"}}}},
)
with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    shards = KueueIndexedJobOperator(  # index 4 fails, within max_failed_indexes: the task succeeds
        task_id="shards", completions=6, backoff_limit_per_index=0, max_failed_indexes=1,
        annotations={{"kwok.airflow-kueue.io/run-duration": "1s", "kwok.airflow-kueue.io/fail-indexes": "4"}},
        **common,
    )
    per_sample = KueueIndexedJobOperator.partial(  # map index i runs a Job of completions[i] indexes
        task_id="per_sample", annotations={{"kwok.airflow-kueue.io/run-duration": "1s"}}, **common
    ).expand(completions=[1, 2, 3, 5])
    report = EmptyOperator(task_id="report")
    shards >> report
    run_1s = {{"kwok.airflow-kueue.io/run-duration": "1s"}}
    KueueJobSetOperator(  # a coordinator and 3 indexed workers, admitted as one Workload
        task_id="gang", namespace={namespace!r}, queue_name={queue!r},
        replicated_jobs=[
            KueueReplicatedJob("coordinator", image="example.invalid/c:1", resources=common["resources"],
                               annotations=run_1s),
            KueueReplicatedJob("workers", image="example.invalid/w:1", completions=3,
                               resources=common["resources"], annotations=run_1s,
                               topology="kubernetes.io/hostname"),  # the queue's flavor is topology-aware
        ],
    )
"""

pytestmark = needs_chromium


@dataclass
class Ui:
    url: str
    """Airflow's base URL (with BASE_PATH)."""
    run_id: str
    browser: Browser
    env: KueueEnv

    def job_name(self, task_id: str, map_index: int = -1, replicated_job: str | None = None) -> str:
        """The one Job the task instance made (of ``replicated_job``, for a JobSet task), from the cluster."""
        names = [
            job.metadata.name
            for job in self.env.jobs()
            if job.metadata.labels.get(TASK_ID_LABEL) == task_id
            and job.metadata.labels.get(MAP_INDEX_LABEL, "-1") == str(map_index)
            and (replicated_job is None or job.metadata.labels.get(REPLICATED_JOB_LABEL) == replicated_job)
        ]
        assert len(names) == 1, names
        return str(names[0])


@pytest.fixture(scope="module")
def tab_env(cluster: Cluster) -> Iterator[KueueEnv]:
    # Topology-aware (the bed's Topology over its Spot nodes), so the JobSet's workers get a TAS placement.
    env = create_kueue_env(cluster, "browser-tab", cpu="4", memory="16Gi", topology=TOPOLOGY_NAME)
    yield env
    delete_kueue_env(env)


@pytest.fixture(scope="module")
def ui(airflow_home: AirflowHome, tab_env: KueueEnv) -> Iterator[Ui]:
    """The DAG run, started while the API server and the browser start; the browser then logged in."""
    airflow_home.write_dag(
        DAG_ID, DAG.format(dag_id=DAG_ID, namespace=tab_env.namespace, queue=tab_env.local_queue)
    )
    with ThreadPoolExecutor(1) as pool:  # `airflow dags reserialize` alone takes 5-15 s: overlap it
        starting = pool.submit(airflow_home.start_dag, DAG_ID, run_after="2026-11-30T02:00:00+00:00")
        try:
            with start_api_server(airflow_home, tab_env, base_path=BASE_PATH) as url, chromium() as browser:
                run = starting.result(timeout=120).wait(timeout=240)
                assert run.succeeded, run.output[-6000:]
                bearer = {"Authorization": f"Bearer {_login(airflow_home, url)}"}
                runs = httpx.get(f"{url}/api/v2/dags/{DAG_ID}/dagRuns", headers=bearer, timeout=30).json()
                (dag_run,) = runs["dag_runs"]
                log_in(
                    browser, url, airflow_home.home / "simple_auth_manager_passwords.json.generated"
                ).close()
                yield Ui(url, dag_run["dag_run_id"], browser, tab_env)
        finally:
            if starting.exception() is None:
                starting.result().kill()  # only if the API server failed before the run ended


def _open_kueue_tab(ui: Ui, task_path: str) -> tuple[Page, FrameLocator]:
    """Open the task instance's page, click its Kueue tab; the page and the tab's iframe (loaded, 200)."""
    page = ui.browser.contexts[0].new_page()
    page.goto(f"{ui.url}/dags/{DAG_ID}/runs/{quote(ui.run_id, safe='')}/{task_path}")
    tab = page.get_by_role("link", name="Kueue", exact=True)
    with page.expect_response(lambda r: "/kueue/task?" in r.url) as answer:
        tab.click()
    response = answer.value
    assert response.url.startswith(f"{ui.url}/kueue/task?"), response.url  # under Airflow's base path
    assert response.status == 200, f"{response.status} {response.url}: {response.text()[:2000]}"
    page.wait_for_url(re.compile(r"/plugin/kueue-task$"))
    frame = page.frame_locator('iframe[title="Kueue"]')
    frame.locator("h2").wait_for()
    return page, frame


def _screenshot(page: Page, request: pytest.FixtureRequest) -> None:
    screenshot(page, request.node.name)


def _grid(frame: FrameLocator) -> list[str]:
    """The state of each index, in index order, from the cells' titles ("index 3: done")."""
    titles = frame.locator(".grid .cell").evaluate_all("cells => cells.map(c => c.title)")
    parsed = [re.fullmatch(r"index (\d+): (\w+)", t) for t in titles]
    assert all(parsed), titles
    assert [int(m[1]) for m in parsed if m] == list(range(len(titles)))
    return [m[2] for m in parsed if m]


def test_unmapped_task_tab_shows_its_job_and_index_grid(ui: Ui, request: pytest.FixtureRequest) -> None:
    page, frame = _open_kueue_tab(ui, "tasks/shards")
    try:
        assert frame.locator("h2").inner_text() == f"{DAG_ID} / shards / {ui.run_id}"
        jobs = frame.locator("section[data-job] h3").all_inner_texts()
        assert jobs == [f"Job {ui.env.namespace}/{ui.job_name('shards')}"]
        assert _grid(frame) == ["done"] * 4 + ["failed", "done"]
        legend = frame.locator(".legend span").all_inner_texts()
        assert [" ".join(t.split()) for t in legend] == ["done 5", "failed 1", "running 0", "waiting 0"]
        assert "admitted" in frame.locator("section[data-job] table").inner_text()
        # A click on the failed index reads its log tail on demand (a KWOK pod has none: the note says so).
        frame.locator('.grid .cell[title="index 4: failed"]').click()
        log = frame.locator("section[data-job] pre.log")
        log.filter(has_text="exited with code").wait_for(timeout=15_000)
        assert "fake pod (KWOK" in log.inner_text(), log.inner_text()
        assert frame.locator('form.log-tail input[name="index"]').input_value() == "4"
    finally:
        _screenshot(page, request)
        page.close()


def test_mapped_task_instance_tab_shows_its_own_job(ui: Ui, request: pytest.FixtureRequest) -> None:
    page, frame = _open_kueue_tab(ui, "tasks/per_sample/mapped/3")
    try:
        assert frame.locator("h2").inner_text() == f"{DAG_ID} / per_sample [3] / {ui.run_id}"
        job = ui.job_name("per_sample", map_index=3)
        assert frame.locator("section[data-job] h3").all_inner_texts() == [f"Job {ui.env.namespace}/{job}"]
        assert _grid(frame) == ["done"] * 5  # completions[3] = 5
        # The UI has no Kueue tab on the mapped task as a whole; its URL, with the browser's login, says why.
        whole = {"dag_id": DAG_ID, "run_id": ui.run_id, "task_id": "per_sample", "map_index": "{MAP_INDEX}"}
        answer = page.request.get(f"{ui.url}/kueue/task", params=whole)
        assert answer.ok and "mapped task with 4 task instances" in answer.text(), answer.text()
    finally:
        _screenshot(page, request)
        page.close()


def test_jobset_task_tab_shows_each_replicated_job_with_the_jobsets_workload(
    ui: Ui, request: pytest.FixtureRequest
) -> None:
    page, frame = _open_kueue_tab(ui, "tasks/gang")
    try:
        assert frame.locator("h2").inner_text() == f"{DAG_ID} / gang / {ui.run_id}"
        jobs = {ui.job_name("gang", replicated_job=part): part for part in ("coordinator", "workers")}
        assert sorted(frame.locator("section[data-job] h3").all_inner_texts()) == sorted(
            f"Job {ui.env.namespace}/{job}" for job in jobs
        )
        (jobset,) = {job.rsplit("-", 2)[0] for job in jobs}
        workloads = set()
        for job, part in jobs.items():
            section = frame.locator(f'section[data-job="{job}"]')
            meta = section.locator("p.muted").first.inner_text()
            assert f"replicated job {part} of JobSet {jobset} (admitted as one Workload)" in meta, meta
            workloads.add(re.search(r"Workload (\S+),", meta)[1])  # type: ignore[index]
            if part == "workers":  # its topology=: Kueue's TAS put its 3 pods on one node
                assert re.search(r"placed on kubernetes\.io/hostname: [\w-]+ \(3\)$", meta), meta
            cells = section.locator(".grid .cell").evaluate_all("cells => cells.map(c => c.title)")
            assert cells == [f"index {i}: done" for i in range(3 if part == "workers" else 1)], cells
        assert len(workloads) == 1, workloads  # the JobSet's one Workload, on both Jobs
    finally:
        _screenshot(page, request)
        page.close()


def test_the_tab_follows_the_colour_mode_picked_in_airflow(ui: Ui, request: pytest.FixtureRequest) -> None:
    """Airflow's UI keeps the user's colour mode in localStorage (next-themes, key ``theme``); switching it in
    the Airflow page switches the Kueue page in its iframe at once, without a reload."""
    page, frame = _open_kueue_tab(ui, "tasks/shards")
    try:
        html = frame.locator("html")
        for mode in ("dark", "light", "dark"):
            page.evaluate("mode => localStorage.setItem('theme', mode)", mode)
            frame.locator(f'html[data-theme="{mode}"]').wait_for(state="attached", timeout=10_000)
            assert html.get_attribute("data-theme") == mode
        background = frame.locator("body").evaluate("b => getComputedStyle(b).backgroundColor")
        assert background == "rgb(26, 32, 44)", background  # the dark page's --bg
    finally:
        _screenshot(page, request)
        page.evaluate("() => localStorage.removeItem('theme')")
        page.close()


def test_another_operators_tab_says_it_has_no_kueue_job(ui: Ui, request: pytest.FixtureRequest) -> None:
    page, frame = _open_kueue_tab(ui, "tasks/report")
    try:
        text = frame.locator("body").inner_text()
        assert "This task has no Kueue Job: its operator is EmptyOperator" in text, text
        assert frame.locator("h3, .grid, table").count() == 0
    finally:
        _screenshot(page, request)
        page.close()


def test_queue_dashboard_opens_from_the_browse_menu(ui: Ui, request: pytest.FixtureRequest) -> None:
    page = ui.browser.contexts[0].new_page()
    try:
        page.goto(f"{ui.url}/")
        page.get_by_role("button", name="Browse").click()
        with page.expect_response(lambda r: "/kueue/queues" in r.url) as answer:
            page.get_by_role("menuitem", name="Kueue queues").click()
        assert answer.value.url == f"{ui.url}/kueue/queues" and answer.value.status == 200, answer.value.url
        frame = page.frame_locator('iframe[title="Kueue queues"]')
        row = frame.locator('[data-part="queues"] tr', has_text=ui.env.namespace)
        assert ui.env.cluster_queue in row.inner_text()
        # Recent runs: the DAG's six Kueue task instances, from their results (the EmptyOperator has none).
        history = frame.locator("table", has=frame.locator("td", has_text="per_sample [3]"))
        assert history.locator("tr", has_text=DAG_ID).count() == 6
    finally:
        _screenshot(page, request)
        page.close()


NIGHTS = ("2026-12-01T02:00:00+00:00",)  # one more run: two points draw every line (and keep CI short)
"""Two more runs of the DAG after the fixture's: the last test of the module, as it adds DAG runs."""


def _element_screenshot(locator: Locator, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    locator.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def test_the_tasks_recent_runs_and_the_queue_over_time_are_plotted(
    ui: Ui, airflow_home: AirflowHome, request: pytest.FixtureRequest
) -> None:
    """The queue page stays open (its live stream reads the ClusterQueue at each change of a Job or Workload,
    which samples it) while the DAG runs once more; then a mapped task instance's Kueue tab plots its
    task's two runs, and the queue page its ClusterQueue over that time: accessible inline SVG each."""
    context = ui.browser.contexts[0]
    watcher = context.new_page()
    try:
        watcher.goto(f"{ui.url}/kueue/queues")
        watcher.locator("[data-stream]").wait_for()
        for night in NIGHTS:
            run = airflow_home.test_dag(DAG_ID, run_after=night, timeout=300)
            assert run.succeeded, run.output[-6000:]
    finally:
        watcher.close()
    bearer = {"Authorization": f"Bearer {_login(airflow_home, ui.url)}"}
    runs = httpx.get(f"{ui.url}/api/v2/dags/{DAG_ID}/dagRuns", headers=bearer, timeout=30).json()
    run_ids = {r["dag_run_id"] for r in runs["dag_runs"]}
    assert len(run_ids) == 2, run_ids

    page, frame = _open_kueue_tab(ui, "tasks/per_sample/mapped/3")
    try:
        trend = frame.locator('section[data-trend="task"]')
        chart = trend.locator('svg[role="img"]')
        title = chart.locator("title").first.text_content()
        assert title == f"Run time against the ideal, and queue wait: {DAG_ID} / per_sample [3]", title
        desc = chart.locator("desc").text_content() or ""
        assert "Run time, ideal run time and queue wait of the last 2 runs" in desc, desc
        tips = chart.locator("circle > title").all_text_contents()
        assert {t.split(" (")[0] for t in tips} == run_ids, tips  # a run-time point per DAG run
        assert all("5/5 shards" in t and "ideal -" not in t for t in tips), tips
        assert chart.locator("rect > title").count() == 2, "a queue-wait point per run"
        assert chart.locator("polyline").count() == 3, "run time, ideal and wait lines"
        box = chart.bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 100, box
        assert "Newest run" in trend.inner_text()
        trend.scroll_into_view_if_needed()
        _element_screenshot(trend, "kueue-task-trend")
    finally:
        _screenshot(page, request)
        page.close()

    queues = context.new_page()
    try:
        queues.goto(f"{ui.url}/kueue/queues")
        over_time = queues.locator('section[data-trend="queues"]')
        cq = ui.env.cluster_queue
        text = over_time.inner_text()
        assert f"ClusterQueue {cq} over time" in text and "at most the last 6 hours" in text, text
        for kind in ("quota", "workloads"):  # other tests' queues may be on the page too: this one's charts
            svg = over_time.locator(f'svg[role="img"][id="{chart_id(kind, cq)}"]')
            assert svg.count() == 1 and svg.locator("polyline").count() >= 1, kind
            assert cq in (svg.locator("title").first.text_content() or "")
        samples = queues.request.get(f"{ui.url}/kueue/api/queues").json()["over_time"][cq]
        assert len(samples) >= 3 and max(s["admitted"] for s in samples) >= 1, samples
        runs_chart = queues.locator(f'svg[role="img"][id="{chart_id("runs", cq)}"]')
        titles = runs_chart.locator("circle > title").all_text_contents()
        # every point names its DAG and task; this test's runs are among them (other tests of the module
        # may have run other DAGs on the same queue)
        assert titles and all(re.match(r"^[\w.-]+ / [\w.-]+", t) for t in titles), titles
        assert sum(t.startswith(f"{DAG_ID} / ") for t in titles) >= 2, titles
        _element_screenshot(over_time, "kueue-queues-over-time")
        _element_screenshot(runs_chart, "kueue-queues-recent-runs")
    finally:
        _screenshot(queues, request)
        queues.close()


def test_the_tab_links_to_its_whole_dag_run_and_to_the_dags_nights_plotted(
    ui: Ui, request: pytest.FixtureRequest
) -> None:
    """From the shards task's Kueue tab, in its iframe: the whole DAG run (every Kueue task instance, mapped
    ones one row each), then the DAG's nights, whose plots are drawn as accessible inline SVG."""
    page, frame = _open_kueue_tab(ui, "tasks/shards")
    try:
        frame.get_by_role("link", name="Every Kueue task of this DAG run").click()
        rows = frame.locator('table[data-dag-run="rows"] tr td:first-child')
        rows.first.wait_for()
        tasks = rows.all_inner_texts()
        assert tasks == ["gang", *(f"per_sample [{i}]" for i in range(4)), "shards"], tasks
        totals = frame.locator('section[data-dag-run="totals"]').inner_text()
        assert "6 Kueue task instances" in totals and " done, 1 failed" in totals, totals  # shards' index 4

        frame.get_by_role("link", name=f"Nights of {DAG_ID}").click()
        chart = frame.locator(f'svg[role="img"][id="{chart_id("nights", DAG_ID, "per_sample")}"]')
        chart.wait_for()
        title = chart.locator("title").first.text_content()
        assert (
            title == f"Run time against the forecast and the deadline, and queue wait: {DAG_ID} / per_sample"
        )
        tips = chart.locator("circle > title").all_text_contents()
        assert tips and all(t.startswith("manual__") for t in tips), tips  # a point per night, named
        box = chart.bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 100, box
        assert "Newest night" in frame.locator('section[data-nights="per_sample"]').inner_text()
    finally:
        _screenshot(page, request)
        page.close()
    alone = ui.browser.contexts[0].new_page()  # the page by itself: an element screenshot of it whole
    try:
        alone.goto(f"{ui.url}/kueue/nights?dag_id={DAG_ID}&task_id=per_sample")
        _element_screenshot(alone.locator('section[data-nights="per_sample"]'), "kueue-nights")
    finally:
        alone.close()
