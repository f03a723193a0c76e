#!/usr/bin/env python
"""Status handling of a 100,000-index Job: time per status event in the trigger, the UI grid and the result.

No cluster: the Job and Workload objects are built here in three shapes, each as the apiserver would send
them in a watch event (JSON bytes):

- ``mid-run``: 40 % done, the in-flight window of ``--parallelism`` indexes fragmented (every other index of
  the window done), a few failed indexes: what a 100,000-index Job at parallelism 1,000 looks like;
- ``finished``: every index done (``"0-99999"``), the Job Complete: the final event;
- ``worst``: every other index done (50,000 intervals, ~340 KB of ``completedIndexes``): the most
  fragmented status Kubernetes can report for this Job.

Per event it times, ``--repeat`` times each:

- **anchor: decode** -- ``json.loads`` of the watch event: the cost every client pays to read the event at
  all, before any handling;
- **trigger** -- what ``KueueJobTrigger._until_outcome`` computes per event: ``view_of`` (parses both index
  strings and the Workload), ``unmanaged_verdict``, ``outcome_of``, the ledger progress and ``progress_line``;
- **UI grid** -- ``index_grid`` over the Job and the live pods' indexes, ``to_dict`` and ``json.dumps``;
- **result** -- ``result_of(...).to_dict()`` and ``json.dumps``: the final event's payload (its size is
  reported too).

Target: < 5 ms per event for each. Writes ``results/<name>.md`` and ``.json``.

    .venv/bin/python benchmarks/status_100k.py            # about 1 min
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from airflow_kueue_provider.kueue.index_set import IndexSet  # noqa: E402
from airflow_kueue_provider.kueue.job_progress import outcome_of, progress_line, result_of, view_of  # noqa: E402
from airflow_kueue_provider.kueue.progress.quota_guard import unmanaged_verdict  # noqa: E402
from airflow_kueue_provider.plugins.views.index_grid import index_grid  # noqa: E402

COMPLETIONS = 100_000
TARGET_MS = 5.0
CREATED = "2026-12-01T01:00:00Z"
ADMITTED = "2026-12-01T01:00:05Z"


def job_object(
    completed: IndexSet, failed: IndexSet, active: int, finished: bool, parallelism: int
) -> dict[str, Any]:
    """A batch/v1 Job as the apiserver returns it (the fields a real one has, at their real sizes)."""
    conditions = [
        {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": "2026-12-01T03:00:00Z"},
        {"type": "Complete", "status": "True", "lastTransitionTime": "2026-12-01T03:00:01Z"},
    ]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "genomics-nightly-align-abc123",
            "namespace": "genomics",
            "uid": "6f1c0f7e-1d7a-4c43-9d1e-0b5d8f3a9e21",
            "resourceVersion": "123456789",
            "creationTimestamp": CREATED,
            "labels": {
                "kueue.x-k8s.io/queue-name": "spot",
                "app.kubernetes.io/managed-by": "airflow-kueue-provider",
                "airflow-kueue.io/dag-id": "genomics_nightly",
                "airflow-kueue.io/task-id": "align",
                "airflow-kueue.io/try-number": "1",
            },
            "annotations": {"airflow-kueue.io/run-id": "scheduled__2026-12-01T01:00:00+00:00"},
        },
        "spec": {
            "completions": COMPLETIONS,
            "parallelism": parallelism,
            "completionMode": "Indexed",
            "backoffLimitPerIndex": 1,
            "maxFailedIndexes": 100,
            "suspend": False,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/managed-by": "airflow-kueue-provider"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "base",
                            "image": "registry.example/genomics/align:2026.11",
                            "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
                        }
                    ],
                },
            },
        },
        "status": {
            "startTime": ADMITTED,
            "active": active,
            "ready": active,
            "succeeded": len(completed),
            "failed": len(failed),
            "completedIndexes": str(completed),
            "failedIndexes": str(failed),
            "uncountedTerminatedPods": {},
            **({"conditions": conditions, "completionTime": "2026-12-01T03:00:01Z"} if finished else {}),
        },
    }


def workload_object(finished: bool) -> dict[str, Any]:
    """The Job's Kueue Workload (v1beta2), admitted."""
    conditions = [
        {
            "type": "QuotaReserved",
            "status": "True",
            "reason": "QuotaReserved",
            "lastTransitionTime": ADMITTED,
        },
        {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": ADMITTED},
    ]
    if finished:
        conditions.append(
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "lastTransitionTime": "2026-12-01T03:00:01Z",
            }
        )
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-genomics-nightly-align-abc123-1f2e3", "namespace": "genomics"},
        "spec": {"queueName": "spot", "podSets": [{"name": "main", "count": 1000}]},
        "status": {
            "admission": {
                "clusterQueue": "spot-cq",
                "podSetAssignments": [{"name": "main", "count": 1000, "flavors": {"cpu": "spot"}}],
            },
            "conditions": conditions,
        },
    }


def shapes(parallelism: int) -> dict[str, tuple[dict[str, Any], IndexSet]]:
    """The three Jobs (see the module docstring) and, for each, the indexes live pods hold."""
    done_before = 40_000
    window = range(done_before, done_before + parallelism)
    mid_done = IndexSet.range(0, done_before) | IndexSet.from_indexes(i for i in window if i % 2 == 0)
    mid_failed = IndexSet.from_indexes([17, 4_711, 23_456])
    mid_running = IndexSet.from_indexes(i for i in window if i % 2 == 1)
    worst_done = IndexSet.from_indexes(range(0, COMPLETIONS, 2))
    return {
        "mid-run": (job_object(mid_done, mid_failed, len(mid_running), False, parallelism), mid_running),
        "finished": (
            job_object(IndexSet.range(0, COMPLETIONS), IndexSet(), 0, True, parallelism),
            IndexSet(),
        ),
        "worst": (job_object(worst_done, IndexSet(), parallelism, False, parallelism), IndexSet()),
    }


def trigger_step(job: dict[str, Any], workload: dict[str, Any]) -> str:
    """What the trigger computes for one event (steps 1-4 of ``_until_outcome``, without I/O)."""
    view = view_of(job, workload)
    unmanaged_verdict(view, 60.0, 300.0)
    outcome = outcome_of(view, 100)
    _ledger = (view.completed, view.failed, view.workload.eviction_count if view.workload else 0)
    return progress_line(view) if outcome is None else outcome.status


def grid_step(job: dict[str, Any], running: IndexSet) -> str:
    return json.dumps(index_grid(job, running).to_dict())


def result_step(job: dict[str, Any], workload: dict[str, Any]) -> str:
    view = view_of(job, workload)
    return json.dumps(result_of(view, job, datetime.now(UTC)).to_dict())


def timed(fn: Callable[[], object], repeat: int) -> dict[str, float]:
    """Median, p99 (nearest rank) and max of ``repeat`` calls, in ms."""
    fn()  # warm-up
    samples = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1e6)
    samples.sort()
    p99 = samples[min(len(samples) - 1, max(0, round(0.99 * len(samples)) - 1))]
    return {"p50": statistics.median(samples), "p99": p99, "max": samples[-1]}


def measure(parallelism: int, repeat: int) -> list[dict[str, Any]]:
    rows = []
    for shape, (job, running) in shapes(parallelism).items():
        row = measure_shape(shape, job, running, repeat)
        rows.append(row)
        print(f"{shape}: {json.dumps(row)}", file=sys.stderr)
    return rows


def measure_shape(shape: str, job: dict[str, Any], running: IndexSet, repeat: int) -> dict[str, Any]:
    workload = workload_object(finished=shape == "finished")
    event = json.dumps({"type": "MODIFIED", "object": job}).encode()
    return {
        "shape": shape,
        "intervals": len(IndexSet.parse(job["status"]["completedIndexes"]).intervals),
        "event_bytes": len(event),
        "result_bytes": len(result_step(job, workload).encode()),
        "decode": timed(lambda: json.loads(event), repeat),
        "trigger": timed(lambda: trigger_step(job, workload), repeat),
        "grid": timed(lambda: grid_step(job, running), repeat),
        "result": timed(lambda: result_step(job, workload), repeat),
    }


def report(rows: list[dict[str, Any]], args: argparse.Namespace, seconds: float) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# Status handling of a 100,000-index Job, {now}",
        "",
        f"One Job of {COMPLETIONS:,} indexes at parallelism {args.parallelism:,}; {args.repeat} events per "
        "cell; times are p50 / p99 in ms per event; ratio = p50 / the anchor's p50 (decoding the event). "
        f"Target: < {TARGET_MS:.0f} ms per event. Benchmark wall time {seconds:.0f} s. "
        "Method: benchmarks/README.md.",
        "",
        "| Job status | intervals | event | anchor: decode | trigger | UI grid | result (payload) | target |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        anchor = row["decode"]["p50"]
        cells = [f"{row['decode']['p50']:.2f} / {row['decode']['p99']:.2f}"]
        for key in ("trigger", "grid", "result"):
            cell = row[key]
            cells.append(f"{cell['p50']:.2f} / {cell['p99']:.2f} ({cell['p50'] / anchor:.2f}x)")
        met = all(row[key]["p99"] < TARGET_MS for key in ("trigger", "grid", "result"))
        lines.append(
            f"| {row['shape']} | {row['intervals']:,} | {row['event_bytes'] / 1024:.0f} KiB | {cells[0]} | "
            f"{cells[1]} | {cells[2]} | {cells[3]} ({row['result_bytes'] / 1024:.1f} KiB) | "
            f"{'met' if met else 'missed'} |"
        )
    lines += ["", "## Versions", "", f"- python: {platform.python_version()} ({platform.machine()})"]
    for dist in ("apache-airflow", "airflow-kueue-provider"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            lines.append(f"- {dist}: {metadata.version(dist)}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--parallelism", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--name", default="status_100k")
    args = parser.parse_args()
    start = time.monotonic()
    rows = measure(args.parallelism, args.repeat)
    out = Path(__file__).with_name("results")
    out.mkdir(exist_ok=True)
    text = report(rows, args, time.monotonic() - start)
    (out / f"{args.name}.md").write_text(text)
    (out / f"{args.name}.json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    main()
