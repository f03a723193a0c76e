"""The deadline as one trigger run sees it: the ETA samples so far, the verdict each time (with hysteresis,
kueue/progress/deadline_verdict), and when to hand the task back to its worker (docs/deadlines.md). Without
a deadline every answer is "nothing"."""

from __future__ import annotations

from datetime import UTC, datetime

from ..kueue.progress.deadline import DeadlinePlan, EtaHistory, at_risk
from ..kueue.progress.deadline_verdict import Verdict, last_verdict
from ..kueue.progress.eta import Estimate
from ..kueue.progress.followed_view import FollowedView
from ..kueue.progress.trigger_event import DeadlineReport


class DeadlineWatch:
    def __init__(self, plan: DeadlinePlan | None) -> None:
        self.plan = plan
        self.eta_history = EtaHistory(plan.eta_history if plan else ())
        # The plan's verdict, else the last the history records (an escalated run resumes AT RISK).
        self.verdict: Verdict = (plan.verdict if plan else None) or last_verdict(self.eta_history.samples)

    def check(
        self, queued: bool, estimate: Estimate | None, view: FollowedView
    ) -> tuple[str | None, float | None]:
        """(the progress line's deadline part, 0 to escalate now / seconds until the deadline less the margin,
        when the check is due even without news / None); (None, None) without a deadline."""
        plan = self.plan
        if plan is None:
            return None, None
        now = datetime.now(UTC)
        # Until the run gives an estimate of its own (queued, too few indexes finished): the submit forecast.
        used = estimate if estimate is not None else plan.forecast
        raw = at_risk(used, now, plan.deadline, plan.margin)
        self.verdict = self.verdict.next(raw, used, now, plan.deadline, plan.margin)
        risk = self.verdict.at_risk
        self.eta_history.offer(now, "queued" if queued else "running", estimate, risk)
        line = f"deadline {plan.deadline:%H:%M} UTC: {'AT RISK' if risk else 'on track'}"
        if estimate is None and plan.forecast is not None:
            line += f" (submit forecast {plan.forecast.describe()})"
        # A pending spill is due only for an object back in the queue with no pod left (the worker checks).
        due = plan.escalate or (plan.spill_pending and queued and view.suspended and view.active == 0)
        if risk and due:
            return line, 0.0
        if due:  # no news may come (a queue that stands still, a long shard): look again by then
            return line, max((plan.deadline - plan.margin - now).total_seconds(), 0.05)
        return line, None

    def report(self, status: str) -> DeadlineReport | None:
        """The event's deadline part; a ``deadline_risk`` hand-back adds the margin used, a final event the
        moment the run ended (the last ``eta_history`` sample, for the result's ``deadline_outcome``)."""
        plan = self.plan
        if plan is None:
            return None
        risk = status == "deadline_risk"
        if not risk:
            self.eta_history.finish(datetime.now(UTC), self.verdict.at_risk)
        return DeadlineReport(
            deadline=plan.deadline.isoformat(),
            eta_history=tuple(self.eta_history.samples),
            escalations=tuple(dict(e) for e in plan.escalations),
            margin_seconds=plan.margin.total_seconds() if risk else None,
            spill_pending=risk and not plan.escalate,  # this hand-back is for the waiting spill alone
        )
