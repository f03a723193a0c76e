"""What a result says about its deadline and its forecast (pure): the ``deadline_outcome``, ``forecast`` and
``shard_history`` keys of the task's result, read tolerant of their absence (older results) and of a bad
shape (a key whose shape is wrong is left out; the rest of the result still counts).

The keys (docs/results.md): ``deadline_outcome`` = ``{"deadline", "finished_at", "met", "seconds"}``
(``seconds``: the margin left when met, how late when missed); ``forecast`` = ``{"made_at", "start",
"finish", "finish_early", "finish_late", "nights", "basis"}`` and, once the run ended, ``"actual_finish"``
and ``"error_seconds"`` (actual - forecast finish, signed); ``shard_history`` = ``{"nights": [run ids],
"shards_learned"}``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...kueue.api_time import parse_api_time


@dataclass(frozen=True)
class DeadlineOutcome:
    deadline: datetime
    finished_at: datetime
    met: bool
    seconds: float
    """The margin left when met (>= 0), how late when missed (> 0)."""

    @property
    def margin_seconds(self) -> float:
        """Signed: left before the deadline (> 0), or past it (< 0)."""
        return self.seconds if self.met else -self.seconds

    @classmethod
    def read(cls, value: Any) -> DeadlineOutcome | None:
        if not isinstance(value, Mapping) or not isinstance(value.get("met"), bool):
            return None
        deadline, finished = parse_api_time(value.get("deadline")), parse_api_time(value.get("finished_at"))
        seconds = _number(value.get("seconds"))
        if deadline is None or finished is None or seconds is None:
            return None
        return cls(deadline, finished, value["met"], abs(seconds))


@dataclass(frozen=True)
class FinishForecast:
    made_at: datetime
    start: datetime | None
    finish: datetime
    finish_early: datetime | None
    finish_late: datetime | None
    nights: int
    """How many earlier nights it learned from (0: from the spec alone)."""
    basis: str
    actual_finish: datetime | None = None
    error_seconds: float | None = None
    """Actual - forecast finish (late > 0); None until the run ended."""

    @property
    def seconds_from_submit(self) -> float:
        """The forecast finish, as seconds after it was made (at submit)."""
        return (self.finish - self.made_at).total_seconds()

    @classmethod
    def read(cls, value: Any) -> FinishForecast | None:
        if not isinstance(value, Mapping):
            return None
        made, finish = parse_api_time(value.get("made_at")), parse_api_time(value.get("finish"))
        if made is None or finish is None:
            return None
        nights = value.get("nights")
        return cls(
            made_at=made,
            start=parse_api_time(value.get("start")),
            finish=finish,
            finish_early=parse_api_time(value.get("finish_early")),
            finish_late=parse_api_time(value.get("finish_late")),
            nights=nights if isinstance(nights, int) and not isinstance(nights, bool) and nights > 0 else 0,
            basis=str(value.get("basis") or ""),
            actual_finish=parse_api_time(value.get("actual_finish")),
            error_seconds=_number(value.get("error_seconds")),
        )


def learned_nights(value: Any) -> int | None:
    """How many nights the shard packing learned from (``shard_history.nights``); None without history."""
    if not isinstance(value, Mapping) or not isinstance(value.get("nights"), list):
        return None
    return len(value["nights"])


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def span_text(seconds: float) -> str:
    """A duration for a sentence: ``20 s``, ``4 min``, ``1 h 5 min``."""
    seconds = abs(seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min" if minutes % 60 else f"{minutes // 60} h"


def deadline_sentence(outcome: DeadlineOutcome) -> str:
    """``met with 4 min to spare`` / ``missed by 20 s``."""
    if outcome.met:
        return f"met with {span_text(outcome.seconds)} to spare"
    return f"missed by {span_text(outcome.seconds)}"


def forecast_error_sentence(forecast: FinishForecast) -> str | None:
    """How far off the forecast was (``finished 3 min later than forecast``); None before the run ended."""
    return None if forecast.error_seconds is None else error_sentence(forecast.error_seconds)


def error_sentence(error: float) -> str:
    """``finished 3 min later than forecast`` for an error of +180 s."""
    if abs(error) < 1:
        return "finished as forecast"
    return f"finished {span_text(error)} {'later' if error > 0 else 'earlier'} than forecast"
