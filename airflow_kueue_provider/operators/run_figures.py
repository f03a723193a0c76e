"""The task instance's queue time, run time and cost over every Job it ran (orchestration of
``kueue.figures.attempt_figures``): the Job that just ended from its trigger's event, earlier ones from
the ledger (with checkpointing) or from their Job objects (listed once, at the end)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..hooks.kind_client import KindClient
from ..kueue.checkpoints.ledger import RunLedger
from ..kueue.figures.attempt_figures import (
    AttemptFigures,
    CostModel,
    Pricing,
    merged,
    status_figures,
    totals,
)
from ..kueue.identity.airflow_identity import AirflowIdentity
from ..kueue.index_set import IndexSet
from ..kueue.names import QUEUE_NAME_LABEL, TRY_NUMBER_LABEL
from ..kueue.wording import counted

log = logging.getLogger(__name__)


def event_figures(
    event: Mapping[str, Any], model: CostModel, target_parallelism: int, spot: bool, try_number: int
) -> AttemptFigures | None:
    """The ended Job's figures from the trigger's event (times from the Workload's admission); None for an
    event that carries no run (an error before the Job was followed)."""
    if "running_seconds" not in event or not event.get("job_name"):
        return None
    completions = int(event.get("completions") or target_parallelism)
    admitted = event.get("admitted_parallelism")
    pods = min(int(admitted) if admitted else target_parallelism, completions)
    return model.figures(
        str(event["job_name"]),
        pods,
        _number(event.get("queued_seconds")),
        _number(event.get("running_seconds")),
        spot,
        try_number,
    )


class Lister(Protocol):
    """The task instance's earlier objects still in the cluster, as figures (``ObjectLister``)."""

    def figures(self, model: Any) -> Sequence[AttemptFigures]: ...


def task_instance_totals(
    current: AttemptFigures | None,
    ledger: RunLedger | None,
    model: Pricing,
    jobs: Lister,
) -> dict[str, Any]:
    """The result's per-task-instance figures (see ``kueue.figures.attempt_figures.totals``). The Jobs
    are listed only when earlier Jobs may exist whose figures the ledger does not hold (a retry without
    checkpointing, a ledger written before figures were kept)."""
    recorded = [a.figures for a in (ledger.attempts if ledger else ()) if a.figures is not None]
    if current is not None and all(r.job_name != current.job_name for r in recorded):
        recorded.append(current)  # the ledger's record of it, when there is one, knows the try that made it
    complete = ledger is not None and all(
        a.figures is not None or (current is not None and a.job_name == current.job_name)
        for a in ledger.attempts
    )
    first_try_alone = ledger is None and current is not None and (current.try_number or 1) <= 1
    from_jobs: Sequence[AttemptFigures] = []
    if not (complete or first_try_alone):
        try:
            from_jobs = jobs.figures(model)
        except Exception as exc:  # the figures are a report: never the reason a finished task fails
            log.warning(
                "could not list this task instance's earlier Jobs (%s): their figures are left out", exc
            )
    return totals(merged(recorded, from_jobs), model)


class ObjectLister:
    """The task instance's objects (of its kind) still in the cluster, as figures; ``spill_queue`` objects
    ran on-demand."""

    def __init__(
        self,
        client: KindClient,
        namespace: str,
        identity: AirflowIdentity,
        spot: bool,
        spill_queue: str | None = None,
    ) -> None:
        self.client, self.namespace, self.identity = client, namespace, identity
        self.spot, self.spill_queue = spot, spill_queue

    def figures(self, model: Pricing) -> Sequence[AttemptFigures]:
        found = []
        for obj in self.client.task_instance_objects(self.namespace, self.identity, unsealed_too=False):
            labels = obj["metadata"].get("labels") or {}
            on_spot = self.spot and labels.get(QUEUE_NAME_LABEL) != self.spill_queue
            try_label = labels.get(TRY_NUMBER_LABEL)
            try_number = int(try_label) if try_label and try_label.isdigit() else None
            found.append(status_figures(obj, model, on_spot, try_number))
        return found


def shard_summary(message: str, result: Mapping[str, Any], ledger: RunLedger | None, job_name: str) -> str:
    """The end of a checkpointed try in shard ids, next to the trigger's line about its Job's indexes (a
    retry's Job index 0 is not shard 0)."""
    if ledger is None:
        return message
    attempt = ledger.attempt(job_name)
    ran = f" ({_what_ran(attempt.packs.index_count, attempt.shards)})" if attempt else ""
    failed = result.get("failed_indexes") or "none"
    return (
        f"{message}{ran}; task: {result.get('succeeded')}/{result.get('completions')} shards done over "
        f"{len(ledger.attempts)} attempt(s), failed shards: {_short(str(failed))}"
    )


def _what_ran(indexes: int, shards: IndexSet) -> str:
    """``its 2 indexes ran shards 7,123``; packed (``shards_per_pod``): ``its 6 indexes ran 60 shards,
    0-59`` (not "its 60 indexes": a Job index runs a pack of shards)."""
    which = _short(str(shards))
    if indexes == len(shards):
        return f"its {counted(indexes, 'index')} ran {'shard' if indexes == 1 else 'shards'} {which}"
    return f"its {counted(indexes, 'index')} ran {counted(len(shards), 'shard')}, {which}"


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1].rsplit(",", 1)[0] + ",…"


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
