"""``on_deadline_risk=``: what a task does once its ETA says the deadline will be missed."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from kubernetes.client.rest import ApiException

from ..hooks.kind_client import KindClient
from ..kueue.errors import KueueProviderError
from ..kueue.names import PRIORITY_CLASS_LABEL
from ..kueue.progress.trigger_event import KueueEvent

log = logging.getLogger(__name__)

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")  # a Kubernetes object name (DNS subdomain)
_QUEUE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")  # an object name that fits a label value


class InvalidEscalation(ValueError, KueueProviderError):
    """``on_deadline_risk`` could not be used; the message says what to change."""


@dataclass(frozen=True)
class DeadlineEscalation:
    """Steps taken once, in this order, when the ETA passes the deadline minus the margin; each is logged
    and listed in the result's ``escalations``.

    :param raise_priority: a WorkloadPriorityClass: the Job's ``kueue.x-k8s.io/priority-class`` label is
        changed to it, and Kueue moves its Workload to that priority in place while it waits for quota (a
        Workload that already holds quota keeps its priority: Kueue freezes it then). The Job must have been
        submitted with a WorkloadPriorityClass (``priority_class=``) or none.
    :param notify: called as ``notify(context, info)`` in the task's worker (an Airflow notifier, e.g. a
        ``SlackNotifier``, or any callable); ``info`` has ``message``, ``deadline``, ``eta``, ``job_name``,
        ``namespace``. A notifier that fails is logged and listed, and does not fail the task.
    :param spill_to: a LocalQueue in the task's namespace (e.g. one on on-demand nodes): the unfinished
        shards move there, as a second Job, with the same shard mapping as a retry (checkpoints resume); the
        first Job is deleted, so no shard runs twice. Needs ``checkpointing=``. Taken only while the first
        Job holds no quota and has no pod (waiting for admission, or put back in the queue by an eviction):
        Kubernetes cannot stop an Indexed Job from starting more shards without killing the running ones.
        While the Job runs, the spill waits (listed as "waiting: ...") and is taken if Kueue requeues it.
    """

    raise_priority: str | None = None
    notify: Callable[..., Any] | None = None
    spill_to: str | None = None

    def __post_init__(self) -> None:
        if self.spill_to is not None and not _QUEUE.match(str(self.spill_to)):
            raise InvalidEscalation(
                f"on_deadline_risk spill_to={self.spill_to!r} is not a LocalQueue name (at most 63 lowercase "
                "letters, digits, '-' and '.')"
            )
        if self.spill_to is not None and self.raise_priority is not None:
            raise InvalidEscalation(
                "on_deadline_risk: raise_priority and spill_to both act on the Job while it waits for quota; "
                "give one of them (a spill Job keeps the task's priority_class)"
            )
        if self.raise_priority is not None and not _NAME.match(str(self.raise_priority)):
            raise InvalidEscalation(
                f"on_deadline_risk raise_priority={self.raise_priority!r} is not a WorkloadPriorityClass "
                "name (lowercase letters, digits, '-' and '.')"
            )
        if self.notify is not None and not callable(self.notify):
            raise InvalidEscalation(f"on_deadline_risk notify={self.notify!r} is not callable")
        if self.raise_priority is None and self.notify is None and self.spill_to is None:
            raise InvalidEscalation(
                "on_deadline_risk names no step: give raise_priority or spill_to, and/or notify"
            )

    @classmethod
    def from_param(cls, value: DeadlineEscalation | Mapping[str, Any] | None) -> DeadlineEscalation | None:
        if value is None or isinstance(value, DeadlineEscalation):
            return value
        if not isinstance(value, Mapping):
            raise InvalidEscalation(
                f"on_deadline_risk={value!r}: give DeadlineEscalation(...) or a dict of its fields"
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise InvalidEscalation(f"on_deadline_risk has unknown keys {unknown}; known: {sorted(known)}")
        return cls(**dict(value))


def take_steps(
    escalation: DeadlineEscalation,
    client: KindClient,
    job: Mapping[str, Any],
    event: KueueEvent,
    context: Any,
) -> list[dict[str, str]]:
    """``raise_priority`` and ``notify`` of ``escalation``, once, for ``job`` (read fresh; the trigger's
    ``deadline_risk`` is ``event``); returns the escalations so far (the event's and these), as the result
    lists them. A step that cannot be taken is listed with the reason and does not fail the task: the run
    may still make it. (``spill_to`` creates a Job: the operator takes it, see ``deadline_spill``.)"""
    message = event.message or "deadline at risk"
    meta = job["metadata"]
    namespace, name = str(meta["namespace"]), str(meta["name"])
    now = datetime.now(UTC).isoformat(timespec="seconds")
    steps = [dict(e) for e in event.escalations]
    if escalation.raise_priority:
        steps.append(
            {
                "step": "raise_priority",
                "at": now,
                "detail": _raise(client, job, escalation.raise_priority),
                "why": message,
            }
        )
    if escalation.notify is not None:
        history = event.deadline.eta_history if event.deadline else ()
        info = {
            "message": message,
            "deadline": event.deadline.deadline if event.deadline else None,
            "eta": history[-1].get("eta") if history else None,
            "job_name": name,
            "namespace": namespace,
        }
        try:
            escalation.notify(context, info)
            detail = "sent"
        except Exception as exc:  # a broken notifier must not end a run that can still make it
            log.exception("on_deadline_risk notify failed")
            # The type only: a notifier's message can carry its webhook URL or token, and this detail goes
            # into the result (XCom), the Job's annotations and the UI. The task log has the whole error.
            detail = f"failed: {type(exc).__name__} (see the task log)"
        steps.append({"step": "notify", "at": now, "detail": detail, "why": message})
    return steps


def _raise(client: KindClient, job: Mapping[str, Any], priority_class: str) -> str:
    """Kueue changes a Workload's priority only while it waits for quota, and refuses (webhook) a
    priority-class label added to an object that already runs: one no longer suspended is left as it is."""
    meta, noun = job["metadata"], client.noun
    where = f"{noun} {meta['namespace']}/{meta['name']}"
    if not (job.get("spec") or {}).get("suspend"):
        log.warning("%s already holds quota: its priority stays", where)
        return f"skipped: the {noun} already holds quota (Kueue keeps an admitted Workload's priority)"
    labels = {PRIORITY_CLASS_LABEL: priority_class}
    try:
        client.patch_metadata(meta["namespace"], meta["name"], {"labels": labels}, meta.get("uid"))
    except ApiException as exc:
        log.warning("raising the priority of %s failed: %s", where, exc.reason)
        hint = (
            f" (the identity may not patch {noun}s: deploy/rbac/worker-triggerer.yaml)"
            if exc.status == 403
            else ""
        )
        return f"failed: {exc.status} {exc.reason}{hint}"
    log.warning("%s: WorkloadPriorityClass -> %s", where, priority_class)
    return priority_class
