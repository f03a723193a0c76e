"""The Kueue pages live, in headless Chromium (Debian's ``chromium``), on a real deployment: scheduler,
triggerer, DAG processor and API server on PostgreSQL, the task deferred in the triggerer, every XCom kept in
object storage (the common.io backend on a local directory, threshold 0: the database holds only paths).

One DAG run whose Job's pods KWOK holds Running until the test releases them, behind a blocker Job that
fills the ClusterQueue. The browser, not logged in, is sent to the login; logged in, it watches the queue
page take the Job's admission without a reload, then opens the task from its "Kueue" extra link and watches
the index grid advance, wave by wave, without a reload. Screenshots go to ``.test-reports/screenshots/``.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, FrameLocator, Page

from airflow_kueue_provider.kueue.names import TASK_ID_LABEL

from ..browser import chromium, log_in, needs_chromium, screenshot
from ..cluster import KueueEnv, indexed_job, wait_for
from ..deployment import AirflowDeployment
from .scenarios import wait_for_success

pytestmark = [pytest.mark.quiet, needs_chromium]

XCOM_STORE = Path(tempfile.mkdtemp(prefix="kueue-live-ui-xcom-"))
AIRFLOW_CONFIG = {  # the queue page's run history must read the task's result through the XCom backend
    "core.xcom_backend": "airflow.providers.common.io.xcom.backend.XComObjectStorageBackend",
    "common.io.xcom_objectstorage_path": f"file://{XCOM_STORE}",
    "common.io.xcom_objectstorage_threshold": "0",
}

DAG_ID = "live_ui"
COMPLETIONS, PARALLELISM = 6, 2
DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    KueueIndexedJobOperator(
        task_id="shards", namespace={namespace!r}, queue_name={queue!r}, image="example.invalid/shard:1",
        completions={completions}, parallelism={parallelism},
        resources={{"requests": {{"cpu": "500m", "memory": "256Mi"}}}},
        annotations={{"kwok.airflow-kueue.io/hold": "true"}},
    )
"""


@pytest.fixture
def browser() -> Iterator[Browser]:
    with chromium() as b:
        yield b


def _mark_no_reload(target: Page | FrameLocator) -> Callable[[], Any]:
    """Sets a flag in the page's window; the returned check reads it back (a reload would clear it)."""
    body = target.locator("body")
    body.evaluate("() => { window.__kueueNoReload = 1 }")
    return lambda: body.evaluate("() => window.__kueueNoReload")


def _queue_row(page: Page, namespace: str) -> dict[str, str]:
    """The queue table's row of ``namespace`` (its one LocalQueue), by column header."""
    table = page.locator('[data-part="queues"] table')
    headers = table.locator("tr th").all_inner_texts()
    row = table.locator("tr", has=page.locator(f"td:text-is('{namespace}')"))
    return dict(zip(headers, row.locator("td").all_inner_texts(), strict=False))


def _local_queue_counts(env: KueueEnv) -> tuple[int, int]:
    status = env.cluster.kueue_get("localqueues", env.local_queue, env.namespace).get("status", {})
    return int(status.get("pendingWorkloads", 0)), int(status.get("admittedWorkloads", 0))


def _legend(frame: FrameLocator) -> dict[str, int]:
    spans = frame.locator(".legend span").all_inner_texts()
    return {t.split()[0]: int(t.split()[1]) for t in spans}


def test_the_kueue_pages_follow_the_run_live(
    deployment: AirflowDeployment, kueue_env_factory: Callable[..., KueueEnv], browser: Browser
) -> None:
    env = kueue_env_factory(cpu="1", memory="4Gi")
    env.create_job(indexed_job("blocker", env.local_queue, completions=1, cpu="1", hold=True))
    wait_for("the blocker running", lambda: env.running_pods("blocker"), timeout=120)

    deployment.write_dag(
        DAG_ID,
        DAG.format(
            dag_id=DAG_ID,
            namespace=env.namespace,
            queue=env.local_queue,
            completions=COMPLETIONS,
            parallelism=PARALLELISM,
        ),
    )
    deployment.rest.wait_for_dag(DAG_ID)
    run_id = deployment.rest.trigger(DAG_ID)

    def task_job() -> dict[str, Any] | None:
        jobs = [j for j in env.jobs() if (j.metadata.labels or {}).get(TASK_ID_LABEL) == "shards"]
        return env.job(jobs[0].metadata.name) if jobs else None

    job_name = wait_for("the task's Job", task_job, timeout=240)["metadata"]["name"]
    wait_for(
        "the task deferred",
        lambda: deployment.rest.states(DAG_ID, run_id).get("deferred"),
        timeout=120,
    )
    wait_for("Kueue counting the Job as pending", lambda: _local_queue_counts(env) == (1, 1), timeout=60)
    task_url = f"{deployment.url}/kueue/task?dag_id={DAG_ID}&run_id={quote(run_id, safe='')}&task_id=shards"

    # Not logged in: both pages send the browser to Airflow's login.
    stranger = browser.new_context().new_page()
    for url in (task_url, f"{deployment.url}/kueue/queues"):
        stranger.goto(url)
        assert "/auth/login" in stranger.url, stranger.url
    stranger.context.close()

    # The queue page takes the admission in, without a reload, once the blocker goes.
    page = log_in(browser, deployment.url, deployment.home / "simple_auth_manager_passwords.json.generated")
    page.goto(f"{deployment.url}/kueue/queues")
    page.locator("[data-stream][data-updates]").wait_for()
    before = _queue_row(page, env.namespace)
    assert before["Pending"] == "1" and before["Admitted"] == "1", before
    assert before["Cohort"].endswith("(fair share 0)"), before  # Kueue's fair sharing is on in the bed
    screenshot(page, "kueue-queues-waiting")
    still_there = _mark_no_reload(page)
    env.cluster.batch.delete_namespaced_job("blocker", env.namespace, propagation_policy="Background")
    wait_for(
        "the queue page showing the Job admitted",
        lambda: _queue_row(page, env.namespace).get("Pending") == "0" or None,
        timeout=120,
    )
    assert still_there() == 1, "the queue page reloaded"
    assert int(page.locator("[data-stream]").get_attribute("data-updates") or 0) >= 1
    screenshot(page, "kueue-queues-admitted")

    # The task's extra link opens its Kueue tab in Airflow's UI; the grid advances as indexes finish.
    page.goto(f"{deployment.url}/dags/{DAG_ID}/runs/{quote(run_id, safe='')}/tasks/shards/details")
    link = page.locator('a[rel="noopener noreferrer"]', has_text=re.compile(r"^Kueue$"))
    link.wait_for(timeout=60_000)
    assert link.get_attribute("href", timeout=5_000).endswith(  # type: ignore[union-attr]
        f"/dags/{DAG_ID}/runs/{quote(run_id, safe='')}/tasks/shards/plugin/kueue-task"
    )
    link.click()
    page.wait_for_url(re.compile(r"/plugin/kueue-task$"))
    frame = page.frame_locator('iframe[title="Kueue"]')
    frame.locator(f'[data-job="{job_name}"]').wait_for(timeout=60_000)
    frame.locator("[data-stream]").wait_for()
    wait_for("pods running", lambda: len(env.running_pods(job_name)) == PARALLELISM or None, timeout=120)
    grid_still_there = _mark_no_reload(frame)
    done = 0
    while done < COMPLETIONS:
        wait_for("held pods to release", lambda: env.release(job_name) or None, timeout=120)
        done = min(COMPLETIONS, done + PARALLELISM)
        target = done
        wait_for(
            f"the grid showing {target} done",
            lambda: _legend(frame).get("done", 0) >= target or None,  # noqa: B023
            timeout=120,
        )
        assert grid_still_there() == 1, "the task view reloaded"
        if done == 2 * PARALLELISM:
            summary = frame.locator(".summary").inner_text()
            assert "ETA" in summary, summary
            screenshot(page, "kueue-task-live")
    frame.locator("[data-stream]", has_text="finished").wait_for(timeout=60_000)
    assert _legend(frame) == {"done": COMPLETIONS, "failed": 0, "running": 0, "waiting": 0}
    screenshot(page, "kueue-task-finished")
    wait_for_success(deployment, DAG_ID, run_id, timeout=300)

    # The finished run is in the queue page's history: the task's result, which the database holds only as a
    # path into the object store, read through the configured XCom backend.
    assert [p for p in XCOM_STORE.rglob("*") if p.is_file()], "the result did not go to the object store"
    page.goto(f"{deployment.url}/kueue/queues")
    history = page.get_by_role("heading", name=f"ClusterQueue {env.cluster_queue}", exact=True)
    history.wait_for(timeout=30_000)
    assert DAG_ID in page.locator("table", has=page.locator(f"td:text-is('{run_id}')")).inner_text()
    screenshot(page, "kueue-queues-history")
