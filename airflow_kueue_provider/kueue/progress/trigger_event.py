"""The one event a trigger ends with, as a type (docs/design.md, "The event contract").

It crosses the deferral as a flat dict (Airflow stores it as JSON): ``to_dict`` writes the keys the task's
result is made of, and ``from_dict`` reads them back, also from a trigger of an earlier version, which wrote
the same keys without ``schema`` (version 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..kinds import describe, kind_of_keys

EVENT_SCHEMA_VERSION = 2
"""1: the untyped dicts of the first releases (no ``schema`` key); 2: this type's ``to_dict``."""

Kind = str
"""A registered job kind's name (``kinds.describe``): its description names its name and uid keys."""
_DEADLINE_KEYS = ("deadline", "eta_history", "escalations", "deadline_margin_seconds", "spill_pending")
_ENVELOPE = ("status", "message", "namespace", "failed_jobs", "schema", *_DEADLINE_KEYS)


@dataclass(frozen=True)
class DeadlineReport:
    """The deadline part of an event: the deadline, the ETAs so far and the escalations taken. On a
    ``deadline_risk`` hand-back also the margin the trigger used and whether only a waiting spill is due."""

    deadline: str
    eta_history: tuple[Mapping[str, Any], ...] = ()
    escalations: tuple[Mapping[str, str], ...] = ()
    margin_seconds: float | None = None
    spill_pending: bool = False

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "deadline": self.deadline,
            "eta_history": [dict(s) for s in self.eta_history],
            "escalations": [dict(e) for e in self.escalations],
        }
        if self.margin_seconds is not None:
            data["deadline_margin_seconds"] = self.margin_seconds
        if self.spill_pending:
            data["spill_pending"] = True
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeadlineReport | None:
        if data.get("deadline") is None:
            return None
        margin = data.get("deadline_margin_seconds")
        return cls(
            deadline=str(data["deadline"]),
            eta_history=tuple(dict(s) for s in data.get("eta_history") or ()),
            escalations=tuple(dict(e) for e in data.get("escalations") or ()),
            margin_seconds=float(margin) if margin is not None else None,
            spill_pending=bool(data.get("spill_pending")),
        )


@dataclass(frozen=True)
class KueueEvent:
    """How the followed object ended (or, ``deadline_risk``, why the task must escalate now).

    ``result``: the kind's result keys (``JobResult`` / ``JobSetResult`` as dicts), empty when the object
    could not be read. ``failed_jobs``: each child Job's failed indexes, for the log tails (not a result key).
    """

    status: str
    message: str
    kind: Kind
    name: str
    namespace: str
    uid: str | None = None
    result: Mapping[str, Any] = field(default_factory=dict)
    deadline: DeadlineReport | None = None
    failed_jobs: Mapping[str, str] = field(default_factory=dict)

    @property
    def escalations(self) -> tuple[Mapping[str, str], ...]:
        return self.deadline.escalations if self.deadline else ()

    def result_keys(self) -> dict[str, Any]:
        """What the task returns, before the ledger and the figures over every attempt are added."""
        described = describe(self.kind)
        name_key, uid_key = described.name_key, described.uid_key
        keys: dict[str, Any] = {name_key: self.name, "namespace": self.namespace}
        if self.uid:
            keys[uid_key] = self.uid
        keys.update(self.result)
        if self.deadline is not None:
            report = self.deadline.to_dict()
            keys.update({k: report[k] for k in ("deadline", "eta_history", "escalations")})
        return keys

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "schema": EVENT_SCHEMA_VERSION,
            "status": self.status,
            "message": self.message,
            **self.result_keys(),
        }
        if self.deadline is not None:
            data.update(self.deadline.to_dict())
        if self.failed_jobs:
            data["failed_jobs"] = dict(self.failed_jobs)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KueueEvent:
        described = kind_of_keys(data)  # the kind whose name key it carries (also in a version 1 event)
        kind, name_key, uid_key = described.kind, described.name_key, described.uid_key
        skip = {*_ENVELOPE, name_key, uid_key}
        return cls(
            status=str(data.get("status") or "error"),
            message=str(data.get("message") or ""),
            kind=kind,
            name=str(data.get(name_key) or ""),
            namespace=str(data.get("namespace") or ""),
            uid=data.get(uid_key) or None,
            result={k: v for k, v in data.items() if k not in skip},
            deadline=DeadlineReport.from_dict(data),
            failed_jobs=dict(data.get("failed_jobs") or {}),
        )
