"""The parameters every kind shares, parsed and checked when the DAG is parsed (``KueueOperator.__init__``).

One frozen record of what the checks produce, so the operator's constructor stays the list of its
parameters and what it keeps; bad input fails the DAG's import naming the field, and nothing is created.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..airflow_compat import AirflowFailException
from ..kueue.figures.cost import VmPrice
from ..kueue.k8s_names import is_dns1123_subdomain, is_valid_label_value
from ..kueue.progress.deadline import DeadlineValue
from .checkpointing import Checkpointing
from .deadline_escalation import DeadlineEscalation
from .deadline_handling import DeadlineHandling
from .settings import check_queue_policy
from .task_facts import check_positive_seconds, seconds


@dataclass(frozen=True)
class TemplateParams:
    """What ``KueueOperator`` keeps of its parameters once they passed their parse-time checks."""

    priority_class: str | None
    queue_timeout: float | None
    workload_timeout: float
    start_timeout: float
    vm_price: VmPrice
    deadline_margin: timedelta | None
    deadlines: DeadlineHandling
    checkpointing: Checkpointing | None

    @classmethod
    def parse(
        cls,
        task_id: str,
        logger: logging.Logger | Any,
        *,
        namespace: str | None,
        queue_name: str,
        workload_priority_class: str | None,
        priority_class: str | None,
        queue_timeout: timedelta | float | None,
        workload_timeout: timedelta | float,
        start_timeout: timedelta | float,
        vm_price: VmPrice | dict[str, Any] | None,
        deadline: DeadlineValue | None,
        deadline_margin: timedelta | float | None,
        on_deadline_risk: DeadlineEscalation | dict[str, Any] | None,
        checkpointing: Checkpointing | dict[str, Any] | str | None,
    ) -> TemplateParams:
        """The checks in the order a DAG author meets them; ``logger`` is the operator's (the warnings go
        to the task's log)."""
        priority = _priority_class(task_id, workload_priority_class, priority_class)
        queue_seconds = None if queue_timeout is None else seconds(queue_timeout)
        workload_seconds, start_seconds = seconds(workload_timeout), seconds(start_timeout)
        try:
            price = VmPrice.from_param(vm_price)
        except (TypeError, ValueError) as exc:
            raise AirflowFailException(f"{task_id}: vm_price: {exc}") from None
        margin = None if deadline_margin is None else timedelta(seconds=seconds(deadline_margin))
        deadlines = DeadlineHandling(task_id, deadline, margin, on_deadline_risk, logger)
        try:
            config = Checkpointing.from_param(checkpointing, queue_timeout=queue_seconds)
        except (TypeError, ValueError) as exc:
            raise AirflowFailException(f"{task_id}: checkpointing: {exc}") from None
        if deadlines.spill_to is not None and config is None:
            raise AirflowFailException(
                f"{task_id}: on_deadline_risk spill_to needs checkpointing=: the ledger says which "
                "shards are left, and the spill Job's pods find their shards (and checkpoints) through it"
            )
        deadlines.check_spill_queue(queue_name)
        if queue_seconds is not None and queue_seconds <= 0:
            raise AirflowFailException(f"{task_id}: queue_timeout must be positive, got {queue_seconds}")
        check_positive_seconds(task_id, workload_timeout=workload_seconds, start_timeout=start_seconds)
        _check_priority_class_name(task_id, priority)
        check_task_queues(task_id, namespace, queue_name, priority, deadlines)  # literal values now
        return cls(priority, queue_seconds, workload_seconds, start_seconds, price, margin, deadlines, config)


def check_task_queues(
    task_id: str,
    namespace: str | None,
    queue_name: str,
    priority_class: str | None,
    deadlines: DeadlineHandling,
) -> None:
    """The queues and priority classes the task may ask for (``[kueue]`` allowlists), its escalation's too:
    at parse time the literal values, before submitting the rendered ones."""
    escalation = deadlines.escalation
    raise_priority = escalation.raise_priority if escalation is not None else None
    check_queue_policy(task_id, namespace, queue_name, priority_class, deadlines.spill_to, raise_priority)


def _priority_class(
    task_id: str, workload_priority_class: str | None, priority_class: str | None
) -> str | None:
    """``workload_priority_class``, or ``priority_class`` (its earlier name); not both."""
    if workload_priority_class is not None and priority_class is not None:
        raise AirflowFailException(
            f"{task_id}: set workload_priority_class or priority_class (its earlier name), not both"
        )
    return workload_priority_class if workload_priority_class is not None else priority_class


def _check_priority_class_name(task_id: str, priority_class: str | None) -> None:
    """A WorkloadPriorityClass is named like a DNS subdomain and labels the Workload: both rules hold (a
    Jinja value is left alone)."""
    if (
        priority_class is not None
        and "{{" not in priority_class
        and not (is_dns1123_subdomain(priority_class) and is_valid_label_value(priority_class))
    ):
        raise AirflowFailException(
            f"{task_id}: workload_priority_class {priority_class!r} is not a valid "
            "WorkloadPriorityClass name: use at most 63 lowercase letters, digits, '-' and '.'"
        )
