#!/usr/bin/env python
"""How far off the forecasts made at submit were, over a night's tasks (docs/forecast.md).

Each task's result keeps ``forecast`` with ``actual_finish`` and ``error_seconds``; the error is measured
against the time the task waited and ran after the forecast (``actual_finish - made_at``). The forecast is
made twice at submit: before the create, and again once Kueue has tried the Job's Workload (its place in
the queue exact, seconds later); the result's record is the second, with the first under ``at_submit``.
Both are reported, and how long after the first the second was made. The issue's bar: within 10 % at the
median and 25 % at p90.

    .venv/bin/python benchmarks/night_forecast.py results/night_small_ours.json.gz   # writes .md beside

``benchmarks/night.py`` adds the same section to its report.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

MEDIAN_BAR, P90_BAR = 0.10, 0.25


@dataclass(frozen=True)
class TaskError:
    """One task's forecast against its run: the signed error and the time it covered (seconds)."""

    system: str
    task: str
    error: float
    covered: float
    nights: int
    first_error: float | None = None
    """The forecast before the create (``at_submit``), when it was made again once queued."""
    first_covered: float | None = None
    later: float = 0.0
    """Seconds from the first forecast to the one made once queued."""

    @property
    def share(self) -> float:
        return abs(self.error) / self.covered

    @property
    def first_share(self) -> float:
        """The forecast before the create's share (the same as ``share`` when it was not made again)."""
        if self.first_error is None or self.first_covered is None:
            return self.share
        return abs(self.first_error) / self.first_covered


def task_errors(phases: Iterable[Mapping[str, Any]]) -> list[TaskError]:
    """Every task result with a forecast and its outcome, per phase (system)."""
    errors = []
    for phase in phases:
        for key, result in (phase.get("results") or {}).items():
            forecast = (result or {}).get("forecast") if isinstance(result, Mapping) else None
            if not isinstance(forecast, Mapping) or "error_seconds" not in forecast:
                continue
            made = datetime.fromisoformat(forecast["made_at"])
            ended = datetime.fromisoformat(forecast["actual_finish"])
            covered = max((ended - made).total_seconds(), 1.0)
            task = "|".join(str(key).split("|")[:2])
            nights = int(forecast.get("nights") or 0)
            first, later = forecast.get("at_submit"), 0.0
            first_error = first_covered = None
            if isinstance(first, Mapping) and "error_seconds" in first:
                first_made = datetime.fromisoformat(first["made_at"])
                first_error = float(first["error_seconds"])
                first_covered = max((ended - first_made).total_seconds(), 1.0)
                later = (made - first_made).total_seconds()
            errors.append(
                TaskError(
                    str(phase.get("system")),
                    task,
                    float(forecast["error_seconds"]),
                    covered,
                    nights,
                    first_error,
                    first_covered,
                    later,
                )
            )
    return errors


@dataclass(frozen=True)
class WaitAndRun:
    """One task's forecast split at the Job's admission: the wait (made -> unsuspended) and the run
    (unsuspended -> complete), forecast against measured, seconds."""

    task: str
    wait_forecast: float
    wait_actual: float
    run_forecast: float
    run_actual: float


def wait_and_run(phase: Mapping[str, Any]) -> list[WaitAndRun]:
    """Each forecast task's wait and run against its last Job's record (the one its last try created)."""
    jobs: dict[tuple[str, str, int], Mapping[str, Any]] = {}
    for job in phase.get("jobs") or []:
        key = (str(job.get("dag_id")), str(job.get("task_id")), int(job.get("map_index", -1)))
        if key not in jobs or float(job.get("created") or 0) > float(jobs[key].get("created") or 0):
            jobs[key] = job
    rows = []
    for key, result in (phase.get("results") or {}).items():
        forecast = (result or {}).get("forecast") if isinstance(result, Mapping) else None
        parts = str(key).split("|")
        if len(parts) != 3:
            continue
        dag_id, task_id, map_index = parts
        job = jobs.get((dag_id, task_id, int(map_index)))
        if not isinstance(forecast, Mapping) or job is None:
            continue
        if job.get("unsuspended") is None or job.get("complete") is None:
            continue
        made = datetime.fromisoformat(forecast["made_at"]).timestamp()
        start = datetime.fromisoformat(forecast["start"]).timestamp()
        finish = datetime.fromisoformat(forecast["finish"]).timestamp()
        unsuspended, complete = float(job["unsuspended"]), float(job["complete"])
        wait, run = (start - made, unsuspended - made), (finish - start, complete - unsuspended)
        rows.append(WaitAndRun(task_id, *wait, *run))
    return rows


def split_section(phases: Iterable[Mapping[str, Any]]) -> list[str]:
    """Per step: the median forecast and measured wait and run (where the error is)."""
    lines = [
        "",
        "Where the error is, per step (median seconds; the run from the Job's admission to its end):",
        "",
        "| system | step | tasks | wait: forecast / measured | run: forecast / measured |",
        "|---|---|---:|---:|---:|",
    ]
    for phase in phases:
        rows = wait_and_run(phase)
        for task in sorted({r.task for r in rows}):
            mine = [r for r in rows if r.task == task]
            med = {
                name: percentile([getattr(r, name) for r in mine], 0.5)
                for name in ("wait_forecast", "wait_actual", "run_forecast", "run_actual")
            }
            lines.append(
                f"| {phase.get('system')} | {task} | {len(mine)} | {med['wait_forecast']:.0f} / "
                f"{med['wait_actual']:.0f} | {med['run_forecast']:.0f} / {med['run_actual']:.0f} |"
            )
    return lines if len(lines) > 5 else []


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (``share`` in 0..1) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def section(phases: Iterable[Mapping[str, Any]]) -> str:
    """The report's "Forecast at submit" section (empty when no task had a forecast)."""
    phases = list(phases)
    errors = task_errors(phases)
    if not errors:
        return ""
    lines = [
        "",
        "## Forecast at submit",
        "",
        "|error| / (actual finish - forecast made), per task; the bar: 10 % at the median, 25 % at p90.",
        "Once queued: made again when Kueue had tried the Job's Workload (the record the deadline and the",
        "result use); before the create: the first forecast, blind to Jobs created in the same second.",
        "",
        "| system | step | tasks | once queued: median | p90 | max | before the create: median | p90 "
        "| made again after (median s) | mean signed error (s) | nights of history |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    groups: dict[tuple[str, str], list[TaskError]] = {}
    for e in errors:
        groups.setdefault((e.system, e.task), []).append(e)
        groups.setdefault((e.system, "all"), []).append(e)
    for (system, task), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] == "all", kv[0])):
        shares, firsts = [e.share for e in group], [e.first_share for e in group]
        signed = sum(e.error for e in group) / len(group)
        nights = sorted({e.nights for e in group})
        lines.append(
            f"| {system} | {task} | {len(group)} | {percentile(shares, 0.5):.1%} | "
            f"{percentile(shares, 0.9):.1%} | {max(shares):.1%} | {percentile(firsts, 0.5):.1%} | "
            f"{percentile(firsts, 0.9):.1%} | {percentile([e.later for e in group], 0.5):.1f} | "
            f"{signed:+.1f} | {', '.join(map(str, nights))} |"
        )
    lines += split_section(phases)
    for system in sorted({e.system for e in errors}):
        mine = [e for e in errors if e.system == system]
        for label, shares in (
            ("once queued", [e.share for e in mine]),
            ("before the create", [e.first_share for e in mine]),
        ):
            median, p90 = percentile(shares, 0.5), percentile(shares, 0.9)
            met = median <= MEDIAN_BAR and p90 <= P90_BAR
            lines.append(
                f"\n{system}, {label}: median {median:.1%}, p90 {p90:.1%} over {len(shares)} tasks: "
                f"{'within' if met else 'outside'} the bar."
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("saved", type=Path, help="a night's results/<name>.json.gz")
    p.add_argument("--out", type=Path, help="the .md to write (default: <name>_forecast.md beside it)")
    args = p.parse_args(argv)
    opener = gzip.open if args.saved.suffix == ".gz" else open
    with opener(args.saved, "rt") as saved:
        raw = json.loads(saved.read())
    text = section(raw.get("phases") or [])
    if not text:
        print("no task of this night has a forecast (no shard history and no expected_shard_duration)")
        return 1
    out = args.out or args.saved.with_name(args.saved.name.split(".")[0] + "_forecast.md")
    out.write_text(f"# Forecast at submit: {args.saved.name}\n{text}")
    print(text)
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
