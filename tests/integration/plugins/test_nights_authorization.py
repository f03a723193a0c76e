"""The nights page and the whole-DAG-run page in a real ``airflow api-server``: authorized per DAG as the task
view (alice may read ``kueue_nights_a`` only: another DAG, and one that does not exist, get the same 403),
read from Airflow's database alone (no Kubernetes request), and the same on a second API server over the
same database (nothing sampled in a process)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from airflow_kueue_provider.plugins.trend_pages import chart_id

from ..airflow_runner import AirflowHome
from ..cluster import KueueEnv
from ..tcp_proxy import FreezableProxy
from .test_api_server import start_api_server
from .test_dag_authorization import PLOTTED_DAG, scoped_api_server, scoped_env

__all__ = ["scoped_api_server"]  # the fixture, shared with test_dag_authorization

MINE, OTHER, MISSING = "kueue_nights_a", "kueue_nights_b", "kueue_nights_missing"
NIGHTS = ("2026-12-02T02:00:00+00:00", "2026-12-03T02:00:00+00:00")


def _bearer(url: str, password: str) -> dict[str, str]:
    token = httpx.post(
        f"{url}/auth/token", json={"username": "alice", "password": password}, timeout=10
    ).json()["access_token"]
    return {"Authorization": f"Bearer {token}"}


def test_the_nights_and_dag_run_pages_show_her_dag_only_from_the_database_alike_on_a_second_server(
    scoped_api_server: tuple[str, FreezableProxy, dict[str, str]],
    airflow_home: AirflowHome,
    kueue_env: KueueEnv,
    tmp_path: Path,
) -> None:
    url, proxy, passwords = scoped_api_server
    for dag_id in (MINE, OTHER):
        airflow_home.write_dag(
            dag_id,
            PLOTTED_DAG.format(dag_id=dag_id, namespace=kueue_env.namespace, queue=kueue_env.local_queue),
        )
    for night in NIGHTS:
        run = airflow_home.test_dag(MINE, run_after=night, timeout=300)
        assert run.succeeded, run.output[-6000:]
    bearer = _bearer(url, passwords["alice"])
    run_id = f"manual__{NIGHTS[-1]}"

    def get(
        path: str, params: dict[str, str], base: str = url, headers: dict[str, str] = bearer
    ) -> httpx.Response:
        return httpx.get(f"{base}{path}", params=params, headers=headers, timeout=60)

    nights = get("/kueue/nights", {"dag_id": MINE})
    assert nights.status_code == 200, nights.text[-2000:]
    chart = re.search(rf'<svg id="{chart_id("nights", MINE, "shards")}".*?</svg>', nights.text, re.S)
    assert chart is not None, nights.text[-3000:]
    assert chart[0].count("<circle") >= 2 + 1, "a run-time point per night (and the legend's)"
    assert all(f"manual__{n} (" in chart[0] for n in NIGHTS), "each point names its night"
    assert f'href="dag-run?dag_id={MINE}&amp;run_id=' in nights.text
    shown = get("/kueue/api/nights", {"dag_id": MINE}).json()
    assert [n["run_id"] for n in shown["tasks"][0]["nights"]] == [f"manual__{n}" for n in NIGHTS]

    dag_run = get("/kueue/dag-run", {"dag_id": MINE, "run_id": run_id})
    assert dag_run.status_code == 200 and "1 Kueue task instance" in dag_run.text, dag_run.text[-2000:]
    assert "shards 2/2 done, 0 failed" in dag_run.text and "task_id=shards&amp;map_index=-1" in dag_run.text

    for path, extra in (
        ("/kueue/nights", {}),
        ("/kueue/api/nights", {}),
        ("/kueue/dag-run", {"run_id": run_id}),
        ("/kueue/api/dag-run", {"run_id": run_id}),
    ):
        other, missing = (get(path, {"dag_id": d, **extra}) for d in (OTHER, MISSING))
        assert other.status_code == missing.status_code == 403, (path, other.text, missing.text)
        assert other.text.replace(OTHER, "X") == missing.text.replace(MISSING, "X"), "the same answer"
    assert proxy.connections == 0, "the nights and DAG run pages read no cluster"

    # A second API server over the same database (a replica, or the first one restarted): the same nights.
    env = scoped_env(tmp_path, tmp_path / "ui-kubeconfig")  # the fixture's (the same tmp_path)
    with start_api_server(airflow_home, kueue_env, env) as second:
        again = get("/kueue/nights", {"dag_id": MINE}, second, _bearer(second, passwords["alice"]))
        assert again.status_code == 200 and again.text == nights.text
