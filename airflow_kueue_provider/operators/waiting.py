"""How the template's task waits for its object (``KueueOperator``): deferred or inline with the same
trigger, not at all (``wait_for_completion=False``: a record for ``KueueJobSensor``), or again after a
deadline escalation."""

from __future__ import annotations

import asyncio
import time
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from ..kueue.job_progress import released_so_far
from ..kueue.kinds import KindDescription
from ..kueue.progress.trigger_event import KueueEvent
from ..triggers.log_stream import BadLogParams, LogStreamPlan
from ..triggers.resume_guard import RESUME_GUARD_SECONDS
from .operator_kind import TaskEntry, WaitOn
from .submitted_object import SubmittedObject
from .task_facts import seconds

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.triggers.base import BaseTrigger

    from ..airflow_compat import AirflowException
    from ..hooks.kind_client import KindClient
    from ..kueue.progress.forecast import Forecast
    from ..triggers.kueue_follow import KueueFollowTrigger
    from .deadline_handling import DeadlineHandling, Spill

RESUME_METHOD = "execute_complete"
"""Where a deferred (or, in blocking mode, an inline) trigger's event comes back."""

DEFAULT_INLINE_WAIT = timedelta(seconds=30)
"""``inline_wait``'s default: a deferral costs a worker start to resume, and an event that comes within
``RESUME_GUARD_SECONDS`` (10 s) of it waits for the guard; a Job forecast to end sooner than this is cheaper
to wait for in the worker."""

INLINE_EXTENSION_SLACK = 1.0
"""Seconds an extended inline wait adds to the forecast's late end: the watch's delivery of the last pod."""
OVERRUN_EXTENSIONS = 2
"""How many more times an extended wait is extended while its Job, still admitted, runs past its forecast."""
OVERRUN_EXTENSION_SECONDS = RESUME_GUARD_SECONDS
"""Each of those: a deferral then would lose the guard whenever the Job ends within it."""


def inline_wait_seconds(task_id: str, value: timedelta | float | None) -> float | None:
    """``inline_wait`` in seconds (None or 0: always defer); a bad value fails the DAG's parse, saying why."""
    from ..airflow_compat import AirflowFailException

    if value is None:
        return None
    given = seconds(value)
    if isinstance(given, bool) or not isinstance(given, (int, float)) or not 0 <= given <= 600:
        raise AirflowFailException(
            f"{task_id}: inline_wait must be a timedelta or seconds from 0 to 600 (None or 0: always "
            f"defer), got {value!r}"
        )
    return float(given) or None


def inline_extension(
    made: Forecast | None, admitted_at: datetime | None, now: datetime, taken: int = 0
) -> float | None:
    """Seconds more to wait in the worker once ``inline_wait`` (and ``taken`` extensions) passed, or None:
    defer now.

    A deferral cannot resume the task sooner than ``RESUME_GUARD_SECONDS`` after it (plus a worker start), so
    a Job that Kueue has admitted and whose forecast run (re-anchored at the admission, to its late end) ends
    within that is waited for here, at most that long: a Job that queued longer than forecast then ran as
    forecast no longer loses the guard at the end of its step. One still admitted when that ran out is past
    its forecast (a pod evicted, a slow start) and most likely at its last pods: deferring then lost the
    whole guard to a Job that ended a second later (the small night, 2 tasks of 24), so it is waited for
    ``OVERRUN_EXTENSION_SECONDS`` more, ``OVERRUN_EXTENSIONS`` times at most. A queued Job, or one without a
    forecast, defers."""
    if made is None or admitted_at is None:
        return None
    if taken:
        return OVERRUN_EXTENSION_SECONDS if taken <= OVERRUN_EXTENSIONS else None
    left = (admitted_at + (made.finish_late - made.start.at) - now).total_seconds()
    if left > RESUME_GUARD_SECONDS:
        return None
    return min(max(left, 0.0) + INLINE_EXTENSION_SLACK, RESUME_GUARD_SECONDS)


def log_plan(
    task_id: str, kind: KindDescription, get_logs: bool, indexes: str | int, bytes_per_second: int
) -> LogStreamPlan | None:
    """``get_logs``' plan, checked when the DAG is parsed; None without it."""
    if not get_logs:
        return None
    if kind.child_label is not None:
        raise BadLogParams(
            f"{task_id}: get_logs streams the pods of the object's own Job, and a {kind.kind} runs its "
            "pods in child Jobs: not supported yet; remove get_logs (a failure still shows the failed pods'"
            " tails)"
        )
    return LogStreamPlan.parse(task_id, indexes, bytes_per_second)


class Waiting:
    """Mixed into ``KueueOperator``: reads its parameters and the kind's part (``OperatorKind``)."""

    if TYPE_CHECKING:  # the operator's (KueueOperator's, OperatorKind's, BaseOperator's)
        log: Any
        deferrable: bool
        inline_wait: float | None
        _forecast_made: Forecast | None
        queue_name: str
        kubernetes_conn_id: str
        queue_timeout: float | None
        workload_timeout: float
        start_timeout: float
        _deadlines: DeadlineHandling
        _name: str | None
        _uid: str | None
        _log_plan: LogStreamPlan | None

        @property
        def kind(self) -> str: ...
        def _client(self) -> KindClient: ...
        def resolved_namespace(self) -> str: ...
        def _trigger_for(self, wait: WaitOn) -> KueueFollowTrigger[Any]: ...
        def _trigger_kwargs(self, wait: WaitOn) -> dict[str, Any]: ...
        def _failure(self, message: str, event: Any) -> AirflowException: ...
        def _spill(self, entry: TaskEntry) -> Spill | None: ...
        def defer(
            self,
            *,
            trigger: BaseTrigger,
            method_name: str,
            kwargs: dict[str, Any] | None = None,
            timeout: timedelta | float | None = None,
        ) -> NoReturn: ...
        def resume_execution(
            self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context
        ) -> Any: ...

    def _wait(self, context: Context, trigger: KueueFollowTrigger[Any]) -> dict[str, Any]:
        """Defer to the triggerer; in blocking mode run the same trigger here and resume the way Airflow
        resumes a deferred task (``resume_execution``): one entry into ``execute_complete`` for both.
        A Job this try submitted whose forecast ends it within ``inline_wait`` is waited for here first, and
        the task defers only if it has not ended by then."""
        if self._log_plan is not None:
            trigger.logs = self._log_plan.to_dict()
        if self.deferrable:
            limit = self._inline_limit()
            if limit is None:
                self.defer(trigger=trigger, method_name=RESUME_METHOD)
            inline = asyncio.run(self._inline(trigger, limit))
            if inline is None:
                trigger.deferred_at = time.time()  # the resume guard counts from the deferral itself
                self.defer(trigger=trigger, method_name=RESUME_METHOD)
            event = inline
        else:
            event = asyncio.run(trigger.first_event())
        result: dict[str, Any] = self.resume_execution(RESUME_METHOD, {"event": event}, context)
        return result

    async def _inline(self, trigger: KueueFollowTrigger[Any], limit: float) -> dict[str, Any] | None:
        """The trigger's event if it comes within ``limit``, or within ``inline_extension`` of it for a Job
        about to end; None: the caller defers (the trigger's run here is cancelled first)."""
        following = asyncio.ensure_future(trigger.first_event())
        try:
            done, _ = await asyncio.wait({following}, timeout=limit)
            taken = 0
            while not done:
                admitted_at, now = trigger.admitted_at, datetime.now(UTC)
                more = inline_extension(self._forecast_made, admitted_at, now, taken)
                if more is None:
                    break
                assert admitted_at is not None  # inline_extension says None without it
                self._log_extension(limit, admitted_at, more, taken)
                done, _ = await asyncio.wait({following}, timeout=more)
                taken += 1
            if done:
                return following.result()
            self.log.info("not ended within inline_wait: deferring to the triggerer")
            return None
        finally:
            if not following.done():
                following.cancel()
                with suppress(asyncio.CancelledError):
                    await following

    def _log_extension(self, limit: float, admitted_at: datetime, more: float, taken: int) -> None:
        if taken:
            self.log.info(
                "admitted at %s and still running past its forecast: waiting %.0f s more here (%d of %d)",
                f"{admitted_at:%H:%M:%S}", more, taken, OVERRUN_EXTENSIONS,
            )  # fmt: skip
            return
        self.log.info(
            "not ended within %.0f s (inline_wait), but admitted at %s and forecast to end within "
            "%.0f s, sooner than a deferral could resume: waiting %.1f s more here",
            limit, f"{admitted_at:%H:%M:%S}", RESUME_GUARD_SECONDS, more,
        )  # fmt: skip

    def _inline_limit(self) -> float | None:
        """Seconds to wait in the worker before deferring: ``inline_wait`` when the forecast puts the end
        within it, else None (defer now). Only a try that created its Job makes a forecast (``ForecastStep``):
        a reattached Job has none, and an escalation clears it."""
        made = self._forecast_made
        if self.inline_wait is None or made is None:
            return None
        left = (made.finish.at - datetime.now(UTC)).total_seconds()
        if left > self.inline_wait:
            return None
        self.log.info(
            "the forecast ends the run in %.0f s: waiting for it here (inline_wait %.0f s), not in the "
            "triggerer",
            max(left, 0.0),
            self.inline_wait,
        )
        return self.inline_wait

    def _submitted(self, wait: WaitOn) -> dict[str, Any]:
        """The record a ``KueueJobSensor`` follows the object with, as the trigger would have been wired."""
        follow = {
            "queue_timeout": self.queue_timeout,
            "workload_timeout": self.workload_timeout,
            "start_timeout": self.start_timeout,
            **self._trigger_kwargs(wait),
        }
        meta = wait.obj["metadata"]
        record = SubmittedObject(
            self.kind, self.resolved_namespace(), meta["name"], meta.get("uid") or "", self.queue_name,
            self.kubernetes_conn_id, follow,
        )  # fmt: skip
        self.log.info("not waiting (wait_for_completion=False): a KueueJobSensor can follow %s", record)
        return record.to_dict()

    def _escalate(self, context: Context, event: KueueEvent, entry: TaskEntry) -> dict[str, Any]:
        """The ETA passed the deadline (less the margin): take ``on_deadline_risk``'s steps, then wait again
        with a trigger that only keeps the ETA."""
        self.log.warning("%s: escalating", event.message or "deadline at risk")
        client = entry.client
        obj = client.get(self.resolved_namespace(), event.name)
        if obj is None:
            gone = f"{self.resolved_namespace()}/{event.name} is gone (deleted while the task escalated)"
            raise self._failure(f"{self.kind} {gone}", event.to_dict())
        escalated = self._deadlines.escalate(context, event, client, obj, self._spill(entry))
        self._forecast_made = None  # it was the submit's: the escalated run defers at once
        self._name, self._uid = escalated.obj["metadata"]["name"], escalated.obj["metadata"].get("uid")
        released = released_so_far(event.result)  # the next trigger counts on from the quota released so far
        trigger = self._trigger_for(
            WaitOn(escalated.obj, entry.shards, escalated.plan, escalated.queue_name, released)
        )
        return self._wait(context, trigger)
