"""deploy/rbac: the team files hold only rights, never the ServiceAccounts Airflow's chart creates.

Before, worker-triggerer.yaml and ui.yaml re-declared airflow-kueue-worker and airflow-kueue-ui: a platform
team that ran ``kubectl delete -f worker-triggerer.yaml`` (with ``batch-jobs`` replaced) to take one team
namespace's rights away deleted the ServiceAccount every Airflow worker and triggerer runs as. Now the
ServiceAccounts are in service-accounts.yaml alone (for an Airflow installed without the chart)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

RBAC = Path(__file__).resolve().parents[3] / "deploy" / "rbac"
TEAM_FILES = ("worker-triggerer.yaml", "ui.yaml")
AIRFLOW_NAMESPACE = "airflow"


def _docs(name: str, team: str = "batch-jobs") -> list[dict[str, Any]]:
    """The file's objects as applied for ``team`` (its ``batch-jobs`` replaced, as the comments say)."""
    text = (RBAC / name).read_text().replace("batch-jobs", team)
    return [d for d in yaml.safe_load_all(text) if d]


def _bound_accounts(name: str) -> set[tuple[str, str]]:
    return {
        (s["name"], s["namespace"])
        for d in _docs(name)
        for s in d.get("subjects") or []
        if s.get("kind") == "ServiceAccount"
    }


def test_deleting_a_team_file_deletes_nothing_in_airflows_namespace() -> None:
    for name in TEAM_FILES:
        deleted = _docs(name, team="team-a")
        assert not [d for d in deleted if d["kind"] == "ServiceAccount"], name
        assert not [d for d in deleted if d["metadata"].get("namespace") == AIRFLOW_NAMESPACE], name


def test_the_worker_file_is_one_team_namespace_only() -> None:
    deleted = _docs("worker-triggerer.yaml", team="team-a")
    assert {(d["kind"], d["metadata"].get("namespace")) for d in deleted} == {
        ("Role", "team-a"),
        ("RoleBinding", "team-a"),
    }


def test_service_accounts_yaml_declares_exactly_the_bound_accounts() -> None:
    declared = _docs("service-accounts.yaml")
    assert {d["kind"] for d in declared} == {"ServiceAccount"}
    accounts = {(d["metadata"]["name"], d["metadata"]["namespace"]) for d in declared}
    bound = set().union(*(_bound_accounts(name) for name in TEAM_FILES))
    assert accounts == bound == {("airflow-kueue-worker", "airflow"), ("airflow-kueue-ui", "airflow")}
