"""Queue declarations from YAML files, applied through the queue-setup hook, and the drift report: what the
``KueueQueueSetupOperator`` and the ``python -m airflow_kueue_provider.queues`` command share."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from ..kueue.identity.queue_ownership import PREVIOUS_MANAGERS
from ..kueue.queues.queue_setup import InvalidQueueDeclaration, QueueObject, in_apply_order, read_declarations
from .queue_setup_hook import ApplyOutcome, KueueQueueSetupHook

SUFFIXES = (".yaml", ".yml")


def load_declarations(paths: Sequence[str | Path]) -> list[QueueObject]:
    """The Kueue objects declared in ``paths`` (YAML files, or directories of them, read in name order),
    checked and in apply order; nothing is applied when any document is wrong."""
    documents: list[tuple[Path, list[Any]]] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file())
        elif path.is_file():
            files = [path]
        else:
            raise InvalidQueueDeclaration(f"{path}: no such file or directory of queue declarations")
        for file in files:
            try:
                documents.append((file, list(yaml.safe_load_all(file.read_text()))))
            except yaml.YAMLError as exc:
                raise InvalidQueueDeclaration(f"{file}: not valid YAML: {exc}") from exc
    return in_apply_order(obj for file, docs in documents for obj in read_declarations(docs, str(file)))


def apply_declarations(
    hook: KueueQueueSetupHook,
    objects: Sequence[QueueObject],
    *,
    check_only: bool = False,
    force: bool = False,
    adopt_managers: Sequence[str] = PREVIOUS_MANAGERS,
) -> list[ApplyOutcome]:
    return [
        hook.apply(obj, check_only=check_only, force=force, adopt_managers=adopt_managers) for obj in objects
    ]


def report(outcomes: Sequence[ApplyOutcome]) -> dict[str, Any]:
    """The task's result: every object's outcome, and a count per outcome."""
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.action] = counts.get(outcome.action, 0) + 1
    objects = [
        {
            "object": o.ref,
            "action": o.action,
            "drift": list(o.drift),
            "conflicts": list(map(str, o.conflicts)),
        }
        for o in outcomes
    ]
    return {"counts": counts, "objects": objects}


def conflict_summary(outcomes: Sequence[ApplyOutcome]) -> str:
    """One line naming every declared field another manager owns, per object ("" when none)."""
    return "; ".join(
        f"{o.ref}: {', '.join(map(str, o.conflicts))}" for o in outcomes if o.action == "conflict"
    )
