"""The Kueue pages' reads are capped per user and in total, and never starve Airflow's own routes, in a
real ``airflow api-server``.

The API server reads the cluster through a loopback proxy that holds every request for ``DELAY_SECONDS``
(a slow or overloaded kube-apiserver): each log tail waits on the cluster for seconds. Sixty of them from one
user used to hold all 40 tokens of the API server's shared thread pool, where Airflow's sync routes run, and
``/api/v2/monitor/health`` waited its turn behind them.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devcluster.layout import PORTS

from ..airflow_runner import AirflowHome
from ..cluster import KueueEnv, wait_for
from ..tcp_proxy import FreezableProxy, kubeconfig_through
from .test_api_server import start_api_server

DELAY_SECONDS = 3.0
"""How long the proxy holds each chunk a client sends (a request; a TLS handshake is two)."""
READS = 60
USERS = ("alice", "bob", "carol", "dave", "erin", "frank")
PER_USER, TOTAL = 8, 40
"""TOTAL: as many reads as the shared pool's 40 tokens, which would hold them all if the reads ran there."""
HEALTH_P99_SECONDS = 2.0
"""Below the proxy's hold (``DELAY_SECONDS``): a health check that waited behind even one read fails, and one
that only shared 2 cores with the parallel pass's other tests does not (1.34 s was seen there; 0.14-0.25 s
alone, 9.3 s when the reads held the shared pool)."""


@pytest.fixture
def slow_cluster_api_server(
    airflow_home: AirflowHome, kueue_env: KueueEnv, devcluster_env: dict[str, str], tmp_path: Path
) -> Iterator[tuple[str, dict[str, str]]]:
    passwords = tmp_path / "passwords.json"
    with FreezableProxy("127.0.0.1", PORTS.apiserver, send_delay=DELAY_SECONDS).running() as proxy:
        kubeconfig = kubeconfig_through(
            proxy, Path(devcluster_env["KUBECONFIG"]), PORTS.apiserver, tmp_path / "slow-kubeconfig"
        )
        env = {
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:admin" for u in USERS),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "AIRFLOW__KUEUE__KUBERNETES_CONN_ID": "kueue_ui_slow",
            "AIRFLOW_CONN_KUEUE_UI_SLOW": json.dumps(
                {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}
            ),
            "AIRFLOW__KUEUE__UI_READS_PER_USER": str(PER_USER),
            "AIRFLOW__KUEUE__UI_READS_TOTAL": str(TOTAL),
        }
        with start_api_server(airflow_home, kueue_env, env) as url:
            wait_for("the passwords file", passwords.exists, timeout=30)
            users = json.loads(passwords.read_text())
            tokens = {
                user: httpx.post(
                    f"{url}/auth/token", json={"username": user, "password": users[user]}, timeout=10
                ).json()["access_token"]
                for user in USERS
            }
            yield url, tokens


LOG_QUERY = {"dag_id": "d", "run_id": "r", "task_id": "t", "job": "no-such-job", "index": "0"}


async def _burst(url: str, tokens: list[str]) -> tuple[list[httpx.Response], list[float]]:
    """One log tail per token, all at once, and ``/api/v2/monitor/health`` polled meanwhile: the answers
    and health's latencies."""
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=len(tokens) + 10, max_keepalive_connections=len(tokens) + 10)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def read(token: str) -> httpx.Response:
            headers = {"Authorization": f"Bearer {token}"}
            return await client.get(f"{url}/kueue/api/task/log", params=LOG_QUERY, headers=headers)

        reads = asyncio.gather(*(read(t) for t in tokens))
        poll_until = time.monotonic() + 3 * DELAY_SECONDS
        await asyncio.sleep(0.2)  # the reads are in
        while time.monotonic() < poll_until:
            started = time.monotonic()
            answer = await client.get(f"{url}/api/v2/monitor/health")
            latencies.append(time.monotonic() - started)
            assert answer.status_code == 200, answer.text
            await asyncio.sleep(0.05)
        return list(await reads), latencies


def _p99(latencies: list[float]) -> float:
    return statistics.quantiles(latencies, n=100)[98] if len(latencies) > 1 else latencies[0]


def test_sixty_log_tails_of_one_user_get_429_beyond_her_cap_and_health_stays_fast(
    slow_cluster_api_server: tuple[str, dict[str, str]],
) -> None:
    url, tokens = slow_cluster_api_server
    warm = httpx.get(
        f"{url}/kueue/api/task/log",
        params=LOG_QUERY,
        headers={"Authorization": f"Bearer {tokens['alice']}"},
        timeout=120,
    )
    assert warm.status_code == 404, warm.text  # the Job list came back (slowly): no such Job

    answers, latencies = asyncio.run(_burst(url, [tokens["alice"]] * READS))
    refused = [a for a in answers if a.status_code == 429]
    served = [a for a in answers if a.status_code != 429]
    p99 = _p99(latencies)
    print(
        f"one user, {READS} log tails: health p99 {p99:.3f} s over {len(latencies)} polls, "
        f"{len(served)} served, {len(refused)} refused"
    )
    assert p99 < HEALTH_P99_SECONDS, f"health p99 {p99:.2f} s while {READS} log tails wait on the cluster"
    assert refused, [a.status_code for a in answers]
    assert len(served) <= PER_USER, f"at most {PER_USER} at once for one user: {len(served)} served"
    assert all(a.status_code == 404 for a in served), [a.text for a in served]
    assert all(a.headers.get("retry-after", "").isdigit() for a in refused), refused[0].headers
    assert "ui_reads_per_user" in refused[0].text, refused[0].text


def test_reads_of_many_users_stop_at_the_total_cap_and_health_stays_fast(
    slow_cluster_api_server: tuple[str, dict[str, str]],
) -> None:
    """Six users' ten reads each: 40 run at once (as many as the shared pool has tokens: it would have no
    thread left for health if the reads ran there), the others get 429 naming the total cap."""
    url, tokens = slow_cluster_api_server
    httpx.get(  # the hook and its connections, made once
        f"{url}/kueue/api/task/log",
        params=LOG_QUERY,
        headers={"Authorization": f"Bearer {tokens['alice']}"},
        timeout=120,
    )
    each = [tokens[u] for u in USERS for _ in range(READS // len(USERS))]
    answers, latencies = asyncio.run(_burst(url, each))
    served = [a for a in answers if a.status_code != 429]
    refused = [a for a in answers if a.status_code == 429]
    p99 = _p99(latencies)
    print(
        f"{len(USERS)} users, {len(each)} log tails: health p99 {p99:.3f} s over {len(latencies)} polls, "
        f"{len(served)} served, {len(refused)} refused"
    )
    assert p99 < HEALTH_P99_SECONDS, f"health p99 {p99:.2f} s while {len(each)} log tails wait on the cluster"
    assert len(served) <= TOTAL, f"at most {TOTAL} at once on the API server: {len(served)} served"
    assert any("ui_reads_total" in a.text for a in refused), [a.text for a in refused][:3]
