"""Job kinds, each described once and registered by its own module (docs/design.md, "Job kinds").

A new kind adds its description module here (and its import below), its hook/trigger/operator modules, and
its RBAC rule; nothing shared names it.
"""

from __future__ import annotations

from . import job, jobset  # noqa: F401  (the built-in kinds register themselves)
from .description import ApiCoordinates, Condition, ConditionEnd, EndRule, KindDescription
from .registry import (
    ChildOf,
    UnknownKind,
    by_plural,
    child_kind,
    child_labels,
    child_of,
    describe,
    finished_condition,
    kind_of_keys,
    kinds,
    operator_names,
    parent_names,
    register,
    succeeded,
    workload_owner_uid,
)

__all__ = [
    "ApiCoordinates",
    "ChildOf",
    "Condition",
    "ConditionEnd",
    "EndRule",
    "KindDescription",
    "UnknownKind",
    "by_plural",
    "child_kind",
    "child_labels",
    "child_of",
    "describe",
    "finished_condition",
    "kind_of_keys",
    "kinds",
    "operator_names",
    "parent_names",
    "register",
    "succeeded",
    "workload_owner_uid",
]
