"""The nights page, the whole-DAG-run page and the Kueue tab's forecast and deadline lines: the words and
numbers of each (views made from ``views.nights``); the HTML in ``templates/nights.html``,
``templates/dag_run.html`` and ``templates/task.html``, which escape every value.

Everything here comes from the results in Airflow's database, read on each request: nothing is sampled or
kept in the API server process, so a restart or a second API server replica shows the same nights."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlencode

from .page_templates import render
from .svg_chart import ChartView, Point, Series, chart_view, duration_unit
from .trend_pages import Cells, chart_id, seconds_text
from .views.nights import DagRunView, TaskNight, TaskNights
from .views.run_history import RunRecord
from .views.run_outcomes import deadline_sentence, error_sentence, forecast_error_sentence

NIGHTS_NOTE = (
    "Read from the tasks' results in Airflow's database on each load (nothing is sampled by this server). "
    "Run time is queue wait + running from submit, the slowest map index's; the forecast is the one made at "
    "submit and the deadline the task's, both placed against that run time: the gap to the deadline is the "
    "margin the result recorded, the gap to the forecast its recorded error. Cost and evictions add up "
    "every map index."
)


@dataclass(frozen=True)
class TaskNightsView:
    task_id: str
    summary: str
    charts: tuple[ChartView, ...]
    rows: tuple[tuple[str, str, Cells], ...]
    """Each night, newest first: its DAG run view's href, its run id, and its cells."""


@dataclass(frozen=True)
class NightsView:
    dag_id: str
    window: str
    tasks: tuple[TaskNightsView, ...]
    note: str
    hidden: str
    """Why nothing is shown (no XCom permission); empty otherwise."""


@dataclass(frozen=True)
class DagRunPage:
    dag_id: str
    run_id: str
    totals: tuple[str, ...]
    rows: tuple[tuple[str, Cells], ...]
    """Each task instance: its Kueue tab's href, and its cells."""
    nights_href: str
    capped: str
    hidden: str


def _when(at: datetime) -> str:
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def _clock(at: datetime) -> str:
    return f"{at.astimezone(UTC):%H:%M:%S}"


def _usd(value: float | None) -> str:
    if value is None:
        return "-"
    return "< $0.01" if 0 < value < 0.01 else f"${value:,.2f}"


def usd_tick(value: float) -> str:
    """A cost axis label without exponents: ``0``, ``0.00015``, ``2.5``, ``1,200``."""
    if value == 0 or value >= 1:
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    decimals = max(2, 1 - math.floor(math.log10(value)) + 1)
    return f"{value:.{decimals}f}".rstrip("0").rstrip(".")


def dag_run_href(dag_id: str, run_id: str) -> str:
    """The whole-DAG-run page, relative to any page of the app."""
    return "dag-run?" + urlencode({"dag_id": dag_id, "run_id": run_id})


def nights_href(dag_id: str, task_id: str | None = None) -> str:
    return "nights?" + urlencode({"dag_id": dag_id, **({"task_id": task_id} if task_id else {})})


def task_href(record: RunRecord) -> str:
    query = {"dag_id": record.dag_id, "run_id": record.run_id, "task_id": record.task_id}
    return "task?" + urlencode({**query, "map_index": str(record.map_index)})


# --- the nights page ---------------------------------------------------------------------------------------


def nights_page(dag_id: str, tasks: Sequence[TaskNights], asked: int, hidden: str = "") -> str:
    view = nights_view(dag_id, tasks, asked, hidden)
    return render("nights.html", title=f"Nights of {dag_id}", stream=None, view=view)


def nights_view(dag_id: str, tasks: Sequence[TaskNights], asked: int, hidden: str = "") -> NightsView:
    window = f"The last {asked} DAG runs of {dag_id}, those with a Kueue task result."
    return NightsView(dag_id, window, tuple(task_nights_view(t) for t in tasks), NIGHTS_NOTE, hidden)


def task_nights_view(task: TaskNights) -> TaskNightsView:
    nights = task.nights
    newest = nights[-1] if nights else None
    summary = "No night with a result." if newest is None else _night_sentence(newest)
    rows = tuple((dag_run_href(task.dag_id, n.run_id), n.run_id, _night_cells(n)) for n in reversed(nights))
    return TaskNightsView(task.task_id, summary, nights_charts(task) if nights else (), rows)


def _night_sentence(n: TaskNight) -> str:
    text = f"Newest night ({n.run_id}, {_when(n.finished_at)}): ran {seconds_text(n.duration_seconds)}"
    text += " from submit"
    if n.forecast_seconds is not None:
        text += f" against {seconds_text(n.forecast_seconds)} forecast"
    if n.deadline is not None:
        text += f"; deadline {deadline_sentence(n.deadline)}"
    text += f"; waited {seconds_text(n.queued_seconds)}; cost {_usd(n.cost_usd)}"
    if n.evictions:
        text += f"; {n.evictions} eviction{'s' if n.evictions > 1 else ''}"
    return text + "."


def _night_cells(n: TaskNight) -> Cells:
    deadline = "-" if n.deadline is None else deadline_sentence(n.deadline)
    return (
        (_when(n.finished_at), deadline),
        (
            str(n.task_instances),
            seconds_text(n.duration_seconds),
            seconds_text(n.forecast_seconds),
            seconds_text(n.queued_seconds),
            _usd(n.cost_usd),
            str(n.evictions),
            f"{n.succeeded}/{n.completions}",
        ),
    )


def nights_charts(task: TaskNights) -> tuple[ChartView, ...]:
    """Run time with the forecast and the deadline, and queue wait; cost; evictions. One point per night."""
    nights = task.nights
    at = [n.finished_at.timestamp() for n in nights]
    longest = max(
        [
            v
            for n in nights
            for v in (n.duration_seconds, n.forecast_seconds, n.deadline_seconds, n.queued_seconds)
            if v is not None
        ]
        or [0.0]
    )
    divisor, unit = duration_unit(longest)

    def scaled(value: float | None) -> float | None:
        return None if value is None else value / divisor

    def note(n: TaskNight) -> str:
        deadline = "" if n.deadline is None else f", deadline {deadline_sentence(n.deadline)}"
        return (
            f"{n.run_id} ({_when(n.finished_at)}): ran {seconds_text(n.duration_seconds)}, forecast "
            f"{seconds_text(n.forecast_seconds)}{deadline}, waited {seconds_text(n.queued_seconds)}"
        )

    def line(name: str, values: Sequence[float | None], color: int, **style: str) -> Series:
        points = [Point(x, scaled(v), note(n)) for x, v, n in zip(at, values, nights, strict=True)]
        return Series(name, points, color, **style)  # type: ignore[arg-type]

    durations = [
        line("run time", [n.duration_seconds for n in nights], 0),
        line("forecast", [n.forecast_seconds for n in nights], 2, line="dashed", marker="diamond"),
        line("deadline", [n.deadline_seconds for n in nights], 1, line="dotted", marker="square"),
        line("queue wait", [n.queued_seconds for n in nights], 4, line="dotted", marker="square"),
    ]
    ident, name, count = (task.dag_id, task.task_id), f"{task.dag_id} / {task.task_id}", len(nights)
    newest = _night_sentence(nights[-1])
    cost = Series("cost", [Point(x, n.cost_usd, note(n)) for x, n in zip(at, nights, strict=True)], 0)
    evictions = Series(
        "evictions", [Point(x, float(n.evictions), note(n)) for x, n in zip(at, nights, strict=True)], 1
    )
    return (
        chart_view(
            chart_id("nights", *ident),
            f"Run time against the forecast and the deadline, and queue wait: {name}",
            f"Run time from submit, the forecast made at submit, the deadline and the queue wait of the "
            f"last {count} nights of task {name}, in {unit}, by the time each night's result was "
            f"written. {newest}",
            durations,
            f"duration ({unit})",
        ),
        chart_view(
            chart_id("nights-cost", *ident),
            f"Estimated cost per night: {name}",
            f"The estimated cost in US dollars of task {name} (every map index and attempt) over the last "
            f"{count} nights.",
            [cost],
            "cost (USD)",
            usd_tick,
        ),
        chart_view(
            chart_id("nights-evictions", *ident),
            f"Evictions per night: {name}",
            f"How many times Kueue evicted the Workloads of task {name} (every map index) over the last "
            f"{count} nights.",
            [evictions],
            "evictions (count)",
            lambda v: f"{v:g}" if v == int(v) else "",
            y_max=4.0,
        ),
    )


# --- one DAG run ------------------------------------------------------------------------------------------


def dag_run_page(view: DagRunView, capped: bool, hidden: str = "") -> str:
    page = dag_run_page_view(view, capped, hidden)
    return render("dag_run.html", title=f"{view.dag_id} / {view.run_id}", stream=None, view=page)


def dag_run_page_view(view: DagRunView, capped: bool, hidden: str = "") -> DagRunPage:
    t = view.totals
    totals = [
        f"{t.task_instances} Kueue task instance{'s' if t.task_instances != 1 else ''}",
        f"cost {_usd(t.cost_usd)}",
        f"shards {t.succeeded}/{t.completions} done, {t.failed} failed",
        f"{t.evictions} eviction{'s' if t.evictions != 1 else ''}",
    ]
    if t.worst_deadline is not None:
        verdict = "missed" if t.deadlines_missed else "met"
        totals.append(
            f"deadline {verdict}: {t.deadlines_met} met, {t.deadlines_missed} missed; the closest "
            f"{deadline_sentence(t.worst_deadline)}"
        )
    if t.last_forecast_error_seconds is not None:
        totals.append(f"the last to finish {error_sentence(t.last_forecast_error_seconds)}")
    rows = tuple((task_href(r), _run_cells(r)) for r in view.rows)
    capped_note = "Only the first results read are shown: the read is capped." if capped else ""
    return DagRunPage(
        view.dag_id, view.run_id, tuple(totals), rows, nights_href(view.dag_id), capped_note, hidden
    )


def _signed(seconds: float) -> str:
    return f"{'+' if seconds >= 0 else '-'}{seconds_text(abs(seconds))}"


def _run_cells(r: RunRecord) -> Cells:
    task = r.task_id + (f" [{r.map_index}]" if r.map_index >= 0 else "")
    deadline = "-" if r.deadline is None else deadline_sentence(r.deadline)
    error = None if r.forecast is None else r.forecast.error_seconds
    return (
        (task, r.cluster_queue, deadline),
        (
            seconds_text(r.queued_seconds),
            seconds_text(r.running_seconds),
            "-" if error is None else _signed(error),
            f"{r.succeeded}/{r.completions}",
            str(r.failed),
            str(r.evictions),
            _usd(r.cost_usd),
        ),
    )


# --- the Kueue tab -----------------------------------------------------------------------------------------


def run_outcome_lines(record: RunRecord | None) -> tuple[str, ...]:
    """The task instance's forecast (start, finish and range) and, after the run, how far off it was; its
    deadline's outcome. Nothing for a result without them."""
    if record is None:
        return ()
    lines = []
    f = record.forecast
    if f is not None:
        learned = "from the spec"
        if f.nights:
            learned = f"from {f.nights} earlier night{'s' if f.nights != 1 else ''}"
        text = f"Forecast at submit ({_when(f.made_at)}, {learned}"
        text += f", {f.basis})" if f.basis else ")"
        if f.start is not None:
            text += f": start {_clock(f.start)}"
        text += f"{',' if f.start is not None else ':'} finish {_clock(f.finish)} UTC"
        if f.finish_early is not None and f.finish_late is not None:
            text += f" (between {_clock(f.finish_early)} and {_clock(f.finish_late)})"
        lines.append(text + ".")
        error = forecast_error_sentence(f)
        if error is not None:
            actual = f" at {_clock(f.actual_finish)} UTC" if f.actual_finish is not None else ""
            lines.append(f"It {error}{actual}.")
    d = record.deadline
    if d is not None:
        lines.append(f"Deadline {d.deadline.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC: {deadline_sentence(d)}.")
    return tuple(lines)
