"""check_names and check_identity: who the Job is, where it is queued, which task instance owns it."""

from __future__ import annotations

from typing import Any

from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.spec.job_identity_checks import check_identity, check_names

from ..job_specs import IDENTITY, spec


def name_problems(**overrides: Any) -> list[str]:
    found: list[str] = []
    check_names(spec(**overrides), lambda parameter, text: found.append(parameter))
    return found


def identity_problems(identity: Any) -> list[str]:
    found: list[str] = []
    check_identity(identity, lambda parameter, text: found.append(text))
    return found


def test_each_name_is_checked_as_its_kind_of_kubernetes_name() -> None:
    assert name_problems() == []
    assert name_problems(queue_name="", priority_class="High_Priority", service_account_name="My_SA") == [
        "queue_name",
        "priority_class",
        "service_account_name",
    ]
    # a ServiceAccount name is a DNS subdomain (dots allowed), a Job name a DNS label (no dots)
    assert name_problems(service_account_name="team.runner", name="team.runner") == ["name"]


def test_an_identity_reports_each_bad_field() -> None:
    assert identity_problems(None) == [] and identity_problems(IDENTITY) == []
    assert identity_problems({"dag_id": "d"}) == ["got {'dag_id': 'd'}: pass an AirflowIdentity"]
    found = identity_problems(AirflowIdentity("", "t", "r", try_number=True, map_index=-2))
    assert found == [
        "dag_id is '': it must be a non-empty string",
        "try_number is True: it must be an integer >= 0",
        "map_index is -2: it must be an integer >= -1",
    ]
