#!/usr/bin/env python
"""20 Kueue task tabs open on a fragmented 100,000-index Job: does the API server still answer its health?

One uvicorn process stands in for Airflow's API server: one event loop serving the Kueue app (the real
``create_app``, its real task stream route and render) and ``GET /api/v2/monitor/health`` (a stand-in route on
the same loop, as Airflow's is). The Job is not on a cluster: a stand-in for the watch hub
(``NamespaceWatch.follow``) hands every follower the same fragmented 100,000-index Job (``--stripes`` runs
of every-other-index done), a new status every ``--change-seconds``, as the real hub does.

Two modes, in the same run, each in a fresh server process:

- ``before``: the task stream of the session base (77b2b56, its ``live_feed.job_events`` loaded from git):
  each stream renders the grid itself, on the event loop;
- ``after``: this checkout: one feed per Job, rendered once per change in a worker thread, fanned out.

For each mode it opens ``--streams`` SSE streams of the task, then polls the health route every
``--poll-seconds`` for ``--seconds`` and reports its latency percentiles, plus the streams' update counts.
Target: health p99 < 1 s. Writes ``results/<name>.md`` and ``.json``.

    .venv/bin/python benchmarks/ui_streams.py                 # about 2 min
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

BASE = "77b2b56"
COMPLETIONS = 100_000
TARGET_P99_SECONDS = 1.0


def fragmented_job(stripes: int, shift: int) -> dict[str, Any]:
    """A running 100,000-index Job whose first ``2 * stripes`` indexes are every other one done."""
    from status_100k import job_object

    from airflow_kueue_provider.kueue.index_set import IndexSet

    done = IndexSet.from_indexes(range(shift % 2, 2 * stripes, 2))
    job = job_object(done, IndexSet(), 1000, False, 1000)
    job["metadata"]["resourceVersion"] = str(1000 + shift)
    return job


# ---- the server process -------------------------------------------------------------------------------


def serve(mode: str, port: int, stripes: int, change_seconds: float) -> None:
    import uvicorn
    from fastapi import FastAPI

    from airflow_kueue_provider.plugins import dashboard_app, live_feed
    from airflow_kueue_provider.plugins.fanout import StreamCaps
    from airflow_kueue_provider.watch.namespace_watch import JobSnapshot, NamespaceWatch

    jobs = [fragmented_job(stripes, shift) for shift in range(2)]
    state = {"version": 0}
    changed = asyncio.Event()

    class Following:
        def __init__(self) -> None:
            self.seen = -1

        async def next(self) -> JobSnapshot:
            while self.seen == state["version"]:
                await changed.wait()
            self.seen = state["version"]
            return JobSnapshot(jobs[self.seen % 2], None)

    class Follow:
        def __init__(self, *key: Any) -> None:
            pass

        async def __aenter__(self) -> Following:
            return Following()

        async def __aexit__(self, *exc: Any) -> None:
            return None

    async def ticker() -> None:
        nonlocal changed
        while True:
            await asyncio.sleep(change_seconds)
            state["version"] += 1
            old, changed = changed, asyncio.Event()
            old.set()

    NamespaceWatch.follow = Follow  # type: ignore[assignment,method-assign]
    if mode == "before":
        spec = importlib.util.spec_from_loader("airflow_kueue_provider.plugins._base_live_feed", loader=None)
        assert spec is not None
        base = importlib.util.module_from_spec(spec)
        base.__package__ = "airflow_kueue_provider.plugins"
        source = subprocess.run(
            ["git", "show", f"{BASE}:airflow_kueue_provider/plugins/live_feed.py"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        exec(compile(source, "live_feed@base", "exec"), base.__dict__)
        live_feed.job_events = base.job_events  # type: ignore[attr-defined]

    class OneJob:
        kubernetes_conn_id = "bench"

        def task_instance_jobs(self, namespace: str | None, identity: Any) -> list[dict[str, Any]]:
            return [jobs[0]]

    kueue = dashboard_app.create_app(
        OneJob,  # type: ignore[arg-type]
        lambda: ["genomics"],
        dependencies=[],
        task_access=[],
        queues_access=[],
        stream_caps=lambda: StreamCaps(per_user=1000, total=1000),
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(ticker())
        yield
        task.cancel()

    app = FastAPI(lifespan=lifespan)

    @app.get("/api/v2/monitor/health")
    async def health() -> dict[str, str]:
        return {"status": "healthy"}

    app.mount("/kueue", kueue)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


# ---- the client side ----------------------------------------------------------------------------------


async def measure(port: int, streams: int, seconds: float, poll: float, job_name: str) -> dict[str, Any]:
    import httpx

    url = f"http://127.0.0.1:{port}"
    params = {"dag_id": "genomics_nightly", "run_id": "r", "task_id": "align", "job": job_name}
    updates = [0] * streams
    stop = asyncio.Event()

    async def stream(i: int, client: httpx.AsyncClient) -> None:
        async with client.stream("GET", f"{url}/kueue/api/task/stream", params=params) as answer:
            assert answer.status_code == 200, answer.status_code
            async for line in answer.aiter_lines():
                if line.startswith("event: part"):
                    updates[i] += 1
                if stop.is_set():
                    return

    latencies: list[float] = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(60, read=None)) as client:
        tasks = [asyncio.create_task(stream(i, client)) for i in range(streams)]
        await asyncio.sleep(2)  # every stream open
        end = time.monotonic() + seconds
        async with httpx.AsyncClient(timeout=30) as prober:
            while time.monotonic() < end:
                start = time.perf_counter()
                answer = await prober.get(f"{url}/api/v2/monitor/health")
                latencies.append(time.perf_counter() - start)
                assert answer.status_code == 200
                await asyncio.sleep(poll)
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))]

    return {
        "probes": len(latencies),
        "p50_s": round(pct(0.50), 4),
        "p90_s": round(pct(0.90), 4),
        "p99_s": round(pct(0.99), 4),
        "max_s": round(latencies[-1], 4),
        "mean_s": round(statistics.fmean(latencies), 4),
        "stream_updates_min": min(updates),
        "stream_updates_max": max(updates),
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_mode(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    argv = [sys.executable, __file__, "--serve", mode, "--port", str(port)]
    argv += ["--stripes", str(args.stripes), "--change-seconds", str(args.change_seconds)]
    server = subprocess.Popen(argv, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError(f"the {mode} server did not start")
            time.sleep(0.2)
        job_name = fragmented_job(1, 0)["metadata"]["name"]
        return asyncio.run(measure(port, args.streams, args.seconds, args.poll_seconds, job_name))
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def render_seconds(stripes: int) -> float:
    from airflow_kueue_provider.kueue.progress.eta import FinishClock
    from airflow_kueue_provider.plugins import dashboard_pages
    from airflow_kueue_provider.plugins.dashboard_data import live_state

    job = fragmented_job(stripes, 0)
    start = time.perf_counter()
    state = live_state(job, None, time.time(), FinishClock(COMPLETIONS))
    dashboard_pages.summary_html(state)
    dashboard_pages.grid_html(state.grid)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--serve", choices=["before", "after"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--poll-seconds", type=float, default=0.1)
    parser.add_argument("--stripes", type=int, default=5000, help="every-other-index runs done (fragments)")
    parser.add_argument("--change-seconds", type=float, default=1.0)
    parser.add_argument("--modes", default="before,after")
    parser.add_argument("--name", default="ui_streams")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.stripes, args.change_seconds)
        return
    render = render_seconds(args.stripes)
    results = {mode: run_mode(mode, args) for mode in args.modes.split(",")}
    report = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": {"python": platform.python_version(), "cpus": os.cpu_count(), "load1": os.getloadavg()[0]},
        "streams": args.streams,
        "seconds": args.seconds,
        "stripes": args.stripes,
        "change_seconds": args.change_seconds,
        "one_render_s": round(render, 4),
        "target_p99_s": TARGET_P99_SECONDS,
        "modes": results,
    }
    out = REPO / "benchmarks" / "results"
    (out / f"{args.name}.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [
        f"# {args.streams} task streams on a fragmented 100,000-index Job: health latency",
        "",
        f"{report['when']}; {args.stripes} fragments, a new status every {args.change_seconds} s, one render "
        f"(summary + grid) {render * 1000:.0f} ms; {args.seconds:.0f} s of probes every "
        f"{args.poll_seconds} s; "
        f"host: {os.cpu_count()} CPUs, load {report['host']['load1']:.1f} (shared).",
        "",
        "| mode | probes | p50 | p90 | p99 | max | updates per stream | p99 < 1 s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mode, r in results.items():
        ok = "yes" if r["p99_s"] < TARGET_P99_SECONDS else "no"
        lines.append(
            f"| {mode} | {r['probes']} | {r['p50_s']:.3f} s | {r['p90_s']:.3f} s | {r['p99_s']:.3f} s | "
            f"{r['max_s']:.3f} s | {r['stream_updates_min']}-{r['stream_updates_max']} | {ok} |"
        )
    lines += [
        "",
        f"`before`: the task stream of {BASE} (each stream renders on the event loop); `after`: one feed per "
        "Job, rendered once per change in a worker thread, fanned out to every stream (`plugins/fanout.py`).",
    ]
    (out / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
