"""The template's parse-time checks (``TemplateParams.parse``): what it keeps, and that the first problem a
DAG author meets is named (the checks run in the order they always ran)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.kueue.figures.cost import VmPrice
from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.template_params import TemplateParams


def _parse(**given: Any) -> TemplateParams:
    params: dict[str, Any] = {
        "namespace": None,
        "queue_name": "q",
        "workload_priority_class": None,
        "priority_class": None,
        "queue_timeout": None,
        "workload_timeout": 60,
        "start_timeout": 600,
        "vm_price": None,
        "deadline": None,
        "deadline_margin": None,
        "on_deadline_risk": None,
        "checkpointing": None,
    }
    return TemplateParams.parse("t", None, **{**params, **given})


def test_durations_become_seconds_and_the_margin_a_timedelta() -> None:
    parsed = _parse(
        queue_timeout=timedelta(minutes=2),
        start_timeout=timedelta(seconds=30),
        deadline="07:00",
        deadline_margin=90,
        checkpointing="blob",
        priority_class="urgent",
    )
    assert (parsed.queue_timeout, parsed.workload_timeout, parsed.start_timeout) == (120, 60, 30)
    assert parsed.deadline_margin == timedelta(seconds=90)
    assert parsed.priority_class == "urgent"  # the earlier name still works
    assert parsed.checkpointing == Checkpointing("blob")
    assert isinstance(parsed.vm_price, VmPrice)
    assert parsed.deadlines.escalation is None


def test_both_priority_names_fail_first() -> None:
    with pytest.raises(AirflowFailException, match="set workload_priority_class or priority_class"):
        _parse(workload_priority_class="a", priority_class="b", vm_price={"nonsense": 1}, queue_timeout=0)


def test_a_bad_vm_price_names_its_field_before_later_checks() -> None:
    with pytest.raises(AirflowFailException, match=r"^t: vm_price: "):
        _parse(vm_price={"nonsense": 1}, queue_timeout=0)


def test_a_spill_needs_checkpointing() -> None:
    with pytest.raises(AirflowFailException, match="spill_to needs checkpointing="):
        _parse(deadline="07:00", on_deadline_risk={"spill_to": "od"})


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"queue_timeout": -1}, "queue_timeout must be positive"),
        ({"start_timeout": 0}, "start_timeout must be a positive number"),
        ({"workload_priority_class": "Urgent!"}, "not a valid WorkloadPriorityClass name"),
    ],
)
def test_bad_values_name_the_field(given: dict[str, Any], message: str) -> None:
    with pytest.raises(AirflowFailException, match=message):
        _parse(**given)


def test_a_jinja_priority_class_is_left_for_the_run() -> None:
    assert _parse(workload_priority_class="{{ params.p }}").priority_class == "{{ params.p }}"
