"""A task's metrics reach a real StatsD listener (UDP on loopback) through Airflow's Stats, with the names
and tags docs/metrics.md gives, while the task runs its Job through Kueue."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest

from ..airflow_runner import AirflowHome
from .test_indexed_job_queueing import write_operator_dag


class StatsdListener:
    """Collects the StatsD lines sent to it until closed."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65535)
            except TimeoutError:
                continue
            self.lines += data.decode(errors="replace").splitlines()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


def test_a_finished_task_sends_its_metrics_to_statsd(
    kueue_env_factory: Any, airflow_home: AirflowHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    listener = StatsdListener()
    for option, value in {
        "STATSD_ON": "True",
        "STATSD_HOST": "127.0.0.1",
        "STATSD_PORT": str(listener.port),
        "STATSD_PREFIX": "airflow",
        "STATSD_INFLUXDB_ENABLED": "True",  # tags on plain StatsD: name,tag=value:1|c
    }.items():
        monkeypatch.setitem(airflow_home.env, f"AIRFLOW__METRICS__{option}", value)
    env = kueue_env_factory()
    try:
        write_operator_dag(airflow_home, "metrics_dag", env, completions=2)
        run = airflow_home.test_dag("metrics_dag", timeout=300)
    finally:
        listener.close()
    assert run.succeeded, run.output[-6000:]
    ours = [line for line in listener.lines if line.startswith("airflow.kueue.")]
    finished = [line for line in ours if line.startswith("airflow.kueue.task.finished,")]
    assert finished and finished[0].endswith(":1|c"), ours
    for tag in ("dag_id=metrics_dag", f"queue={env.local_queue}", "kind=Job", "status=success"):
        assert f",{tag}" in finished[0], finished[0]
    assert f",cluster_queue={env.cluster_queue}" in finished[0], finished[0]
    assert any(line.startswith("airflow.kueue.queue_wait,") and line.endswith("|ms") for line in ours), ours
    assert any(line.startswith("airflow.kueue.run_time,") and line.endswith("|ms") for line in ours), ours
    assert any(line.startswith("airflow.kueue.cost_usd,") and line.endswith("|g") for line in ours), ours
