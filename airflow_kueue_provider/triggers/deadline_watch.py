"""The deadline as one trigger run sees it: the ETA samples so far, the verdict each time, and when to hand
the task back to its worker (docs/deadlines.md). Without a deadline every answer is "nothing"."""

from __future__ import annotations

from datetime import UTC, datetime

from ..kueue.progress.deadline import DeadlinePlan, EtaHistory, at_risk
from ..kueue.progress.eta import Estimate
from ..kueue.progress.followed_view import FollowedView
from ..kueue.progress.trigger_event import DeadlineReport


class DeadlineWatch:
    def __init__(self, plan: DeadlinePlan | None) -> None:
        self.plan = plan
        self.eta_history = EtaHistory(plan.eta_history if plan else ())

    def check(
        self, queued: bool, estimate: Estimate | None, view: FollowedView
    ) -> tuple[str | None, float | None]:
        """(the progress line's deadline part, 0 to escalate now / seconds until the deadline less the margin,
        when the check is due even without news / None); (None, None) without a deadline."""
        plan = self.plan
        if plan is None:
            return None, None
        now = datetime.now(UTC)
        risk = at_risk(estimate, now, plan.deadline, plan.margin)
        self.eta_history.offer(now, "queued" if queued else "running", estimate, risk)
        line = f"deadline {plan.deadline:%H:%M} UTC: {'AT RISK' if risk else 'on track'}"
        # A pending spill is due only for an object back in the queue with no pod left (the worker checks).
        due = plan.escalate or (plan.spill_pending and queued and view.suspended and view.active == 0)
        if risk and due:
            return line, 0.0
        if due:  # no news may come (a queue that stands still, a long shard): look again by then
            return line, max((plan.deadline - plan.margin - now).total_seconds(), 0.05)
        return line, None

    def report(self, status: str) -> DeadlineReport | None:
        """The event's deadline part; a ``deadline_risk`` hand-back adds the margin used."""
        plan = self.plan
        if plan is None:
            return None
        risk = status == "deadline_risk"
        return DeadlineReport(
            deadline=plan.deadline.isoformat(),
            eta_history=tuple(self.eta_history.samples),
            escalations=tuple(dict(e) for e in plan.escalations),
            margin_seconds=plan.margin.total_seconds() if risk else None,
            spill_pending=risk and not plan.escalate,  # this hand-back is for the waiting spill alone
        )
