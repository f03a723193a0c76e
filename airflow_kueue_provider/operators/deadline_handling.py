"""A task's deadline, for every job kind: the checks when the DAG is parsed, the plan at submit, the
escalation once per task instance when the trigger says the run is at risk (docs/deadlines.md).

What it needs is injected: the kind's client (read, annotate, relabel its object) and, for ``spill_to``, the
kind's spill (only the Job kind has one; the JobSet kind refuses ``spill_to`` at parse time).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes.client.rest import ApiException

from ..airflow_compat import AirflowFailException
from ..hooks.kind_client import KindClient
from ..kueue.names import DEADLINE_ANNOTATION, ESCALATIONS_ANNOTATION
from ..kueue.progress.deadline import (
    DeadlinePlan,
    DeadlineValue,
    InvalidDeadline,
    default_margin,
    finished_at,
    margin_covers_relative_deadline,
    past_absolute_deadline,
    resolve_deadline,
    submit_warning,
    taken_before,
)
from ..kueue.progress.deadline_verdict import OUTCOME_KEY, deadline_outcome, last_verdict, outcome_line
from ..kueue.progress.trigger_event import KueueEvent
from .deadline_escalation import DeadlineEscalation, InvalidEscalation, take_steps
from .deadline_spill import SpillOutcome

log = logging.getLogger(__name__)

Spill = Callable[[dict[str, Any], KueueEvent], SpillOutcome]
"""The kind's ``spill_to``: move the object's unfinished shards to the spill queue (deadline_spill)."""


@dataclass(frozen=True)
class Escalated:
    """What the task waits on after an escalation: the object (the spill Job, if it moved), its plan, and
    the queue it waits in (None: the task's own)."""

    obj: dict[str, Any]
    plan: DeadlinePlan
    queue_name: str | None


class DeadlineHandling:
    def __init__(
        self,
        task_id: str,
        deadline: DeadlineValue | None,
        deadline_margin: timedelta | None,
        on_deadline_risk: DeadlineEscalation | Mapping[str, Any] | None,
        logger: logging.Logger | Any = None,
    ) -> None:
        self.log = logger or logging.getLogger(__name__)  # the operator's: its lines go to the task log
        self.task_id = task_id
        self.margin = deadline_margin
        self.templated = isinstance(deadline, str) and "{{" in deadline
        try:
            self.escalation = DeadlineEscalation.from_param(on_deadline_risk)
            if deadline is not None and not self.templated:  # the form, early; templated: at run
                self._refuse_past(deadline, datetime.now(UTC))
        except (InvalidEscalation, InvalidDeadline) as exc:
            raise AirflowFailException(f"{task_id}: {exc}") from None
        if warning := margin_covers_relative_deadline(deadline, deadline_margin):
            self.log.warning("%s: %s", task_id, warning)
        if self.escalation is not None and deadline is None:
            raise AirflowFailException(
                f"{task_id}: on_deadline_risk needs a deadline= to compare the ETA with"
            )

    @staticmethod
    def _refuse_past(deadline: DeadlineValue, now: datetime) -> datetime:
        """The deadline read against ``now``; an absolute one already past is refused (InvalidDeadline)."""
        if past := past_absolute_deadline(deadline, now):
            raise InvalidDeadline(past)
        return resolve_deadline(deadline, now)

    @property
    def spill_to(self) -> str | None:
        return self.escalation.spill_to if self.escalation else None

    def check_spill_queue(self, queue_name: str) -> None:
        """``spill_to`` must name another LocalQueue than the task's (a templated one: once rendered)."""
        if self.spill_to is not None and self.spill_to == queue_name:
            raise AirflowFailException(
                f"{self.task_id}: on_deadline_risk spill_to={queue_name!r} is the task's own queue_name; "
                "name another LocalQueue (e.g. one on on-demand nodes)"
            )

    # --- at submit ---------------------------------------------------------------------------------------
    def plan(self, context: Any, client: KindClient, deadline: DeadlineValue | None) -> DeadlinePlan | None:
        """``deadline`` as rendered (the operator's templated field) against the DAG run's start; the
        escalation's priority class checked."""
        if deadline is None:
            return None
        dag_run = context.get("dag_run")
        started = getattr(dag_run, "start_date", None) or datetime.now(UTC)
        try:
            if self.templated:  # rendered now: a past absolute one is refused before anything is created
                self._refuse_past(deadline, datetime.now(UTC))
            at = resolve_deadline(deadline, started)
        except InvalidDeadline as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from None
        raise_to = self.escalation.raise_priority if self.escalation is not None else None
        if raise_to and not _priority_class_exists(client, raise_to, self.log):
            raise AirflowFailException(
                f"{self.task_id}: on_deadline_risk raise_priority={raise_to!r}: no such "
                "WorkloadPriorityClass in the cluster; create it or name an existing one"
            )
        now = datetime.now(UTC)
        margin = self.margin if self.margin is not None else default_margin(at, now)
        self.log.info("deadline %s UTC (margin %s)", f"{at:%Y-%m-%d %H:%M:%S}", margin)
        if warning := submit_warning(at, margin, now, escalates=self.escalation is not None):
            self.log.warning("%s", warning)
        return DeadlinePlan(at, margin, escalate=self.escalation is not None)

    def once_per_task_instance(
        self, plan: DeadlinePlan | None, previous: list[dict[str, Any]]
    ) -> DeadlinePlan | None:
        """``on_deadline_risk`` is taken once per task instance: a retry (or a restarted worker) whose earlier
        objects record escalations keeps the ETA and the record, and takes no step again."""
        if plan is None or not plan.escalate or not (earlier := taken_before(previous)):
            return plan
        steps = ", ".join(sorted({s.get("step", "?") for s in earlier}))
        self.log.info(
            "on_deadline_risk was taken by an earlier try of this task instance (%s): not again", steps
        )
        return dataclasses.replace(plan, escalate=False, escalations=tuple(earlier))

    @staticmethod
    def mark(manifest: dict[str, Any], plan: DeadlinePlan | None) -> None:
        """The deadline on the object to create, for the UI and kubectl: written by the create itself."""
        if plan is not None:
            annotations = manifest.setdefault("metadata", {}).setdefault("annotations", {})
            annotations[DEADLINE_ANNOTATION] = plan.deadline.isoformat()

    def record_on(self, client: KindClient, obj: dict[str, Any], plan: DeadlinePlan) -> None:
        """The deadline on the object, patched only where it does not carry it yet (an earlier try's object,
        adopted; one created before its deadline was given): one created with ``mark`` costs no request."""
        wanted = plan.deadline.isoformat()
        if ((obj.get("metadata") or {}).get("annotations") or {}).get(DEADLINE_ANNOTATION) != wanted:
            self._annotate(client, obj, {DEADLINE_ANNOTATION: wanted})

    def _annotate(self, client: KindClient, obj: dict[str, Any], annotations: dict[str, str]) -> None:
        """A record for people and the UI: an identity that may not patch the object (deploy/rbac: the worker
        may not patch JobSets, so that it cannot unsuspend one) costs the record, never the run."""
        meta = obj["metadata"]
        try:
            client.patch_metadata(
                meta["namespace"], meta["name"], {"annotations": annotations}, meta.get("uid")
            )
        except ApiException as exc:
            if exc.status != 403:
                raise
            self.log.warning(
                "cannot annotate %s %s with its deadline (403: the identity may not patch %ss; see "
                "deploy/rbac/worker-triggerer.yaml); the task's log and result keep it",
                client.noun,
                meta["name"],
                client.noun,
            )

    # --- when the trigger hands the task back -------------------------------------------------------------
    def escalate(
        self, context: Any, event: KueueEvent, client: KindClient, obj: dict[str, Any], spill: Spill | None
    ) -> Escalated:
        """Take each step of ``on_deadline_risk`` once (a spill that must wait: again when the trigger says
        the object is back in its queue), record them on the object, and say what to wait on next."""
        steps = [dict(e) for e in event.escalations]
        queue_name, spill_pending = None, False
        report = event.deadline
        assert report is not None  # a deadline_risk event carries its deadline
        if self.escalation is not None:
            if not report.spill_pending:  # the first hand-back: every step; later: the spill alone
                steps = take_steps(self.escalation, client, obj, event, context)
            if self.escalation.spill_to and spill is not None:
                spilled = spill(obj, event)
                steps = [s for s in steps if s.get("step") != "spill_to"] + [spilled.step]
                if spilled.job is not None:
                    obj, queue_name = spilled.job, self.escalation.spill_to
                spill_pending = spilled.job is None
            recorded = {ESCALATIONS_ANNOTATION: json.dumps(steps)}
            if queue_name is not None:  # the spill Job: the deadline too, for the UI and kubectl
                recorded[DEADLINE_ANNOTATION] = report.deadline
            self._annotate(client, obj, recorded)
        plan = DeadlinePlan(
            deadline=datetime.fromisoformat(report.deadline),
            margin=self.margin_of(event),
            escalate=False,
            escalations=tuple(steps),
            eta_history=tuple(dict(s) for s in report.eta_history),
            spill_pending=spill_pending,
            verdict=last_verdict(report.eta_history),  # AT RISK: the next trigger starts from there
        )
        return Escalated(obj, plan, queue_name)

    def margin_of(self, event: KueueEvent) -> timedelta:
        """The margin the trigger used (a trigger of an earlier version did not send it)."""
        report = event.deadline
        assert report is not None
        if report.margin_seconds is not None:
            return timedelta(seconds=report.margin_seconds)
        if self.margin is not None:
            return self.margin
        return default_margin(datetime.fromisoformat(report.deadline), datetime.now(UTC))

    # --- when the run ended --------------------------------------------------------------------------------
    def ended(self, result: dict[str, Any], status: str) -> str | None:
        """The run ended: ``deadline_outcome`` in the result (met, with the seconds to spare, or missed, by
        how late) and its line in the task log, returned too; None without a deadline. A try that failed
        before the deadline has not missed it yet (a retry may make it): no outcome, only the line."""
        if not result.get("deadline"):
            return None
        deadline = datetime.fromisoformat(str(result["deadline"]))
        outcome = deadline_outcome(deadline, finished_at(result.get("eta_history"), datetime.now(UTC)))
        if status != "success" and outcome["met"]:
            line = f"deadline {deadline:%H:%M} UTC not met yet: this try ended ({status}) before it"
        else:
            result[OUTCOME_KEY] = outcome
            line = outcome_line(outcome)
        self.log.info("%s", line)
        return line


def _priority_class_exists(client: KindClient, name: str, log: Any) -> bool:
    """WorkloadPriorityClasses are cluster-scoped; the workers' namespaced Role (deploy/rbac) may not read
    them, and then the name is used as given."""
    try:
        return client.hook.get_workload_priority_class(name) is not None
    except ApiException as exc:
        if exc.status != 403:
            raise
        log.warning(
            "cannot check that WorkloadPriorityClass %s exists (403: no cluster-scoped read); "
            "using it as given",
            name,
        )
        return True
