"""deploy/helm/values-aks.yaml gives ``[kueue] identity_key`` to the worker, triggerer and API server only.

The official chart's top-level ``secret`` (and ``env``) reach every Airflow container, the scheduler and the
DAG processor included, which run DAG files' top-level code and never seal a Job: there the key would be one
``os.environ`` away from any DAG author. So the key is in those three components' own ``env``, as a
``valueFrom.secretKeyRef``, the one form the chart's component env renders besides ``value``
(``container_extra_envs`` in chart/templates/_helpers.yaml: ``secretKeyRef`` or ``configMapKeyRef``, each
``name`` and ``key`` only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
VALUES = REPO / "deploy" / "helm" / "values-aks.yaml"
HELM_DOC = REPO / "docs" / "helm.md"
KEY_ENV = "AIRFLOW__KUEUE__IDENTITY_KEY"
SECRET_REF = {"name": "airflow-kueue-identity", "key": "identity-key"}
HOLDERS = ("workers", "triggerer", "apiServer")
NOT_HOLDERS = ("scheduler", "dagProcessor")


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    loaded = yaml.safe_load(VALUES.read_text())
    assert isinstance(loaded, dict)
    return loaded


def _env(values: dict[str, Any], component: str) -> list[dict[str, Any]]:
    return list((values.get(component) or {}).get("env") or [])


def test_no_chart_wide_setting_carries_the_key(values: dict[str, Any]) -> None:
    assert KEY_ENV not in {s.get("envName") for s in values.get("secret") or []}
    assert KEY_ENV not in {e.get("name") for e in values.get("env") or []}
    assert "identity_key" not in ((values.get("config") or {}).get("kueue") or {})
    assert KEY_ENV not in str(values.get("extraEnv") or "") + str(values.get("extraEnvFrom") or "")


@pytest.mark.parametrize("component", HOLDERS)
def test_worker_triggerer_and_api_server_read_it_from_the_secret(
    values: dict[str, Any], component: str
) -> None:
    entries = [e for e in _env(values, component) if e.get("name") == KEY_ENV]
    assert len(entries) == 1, f"{component}: one {KEY_ENV}"
    assert entries[0] == {"name": KEY_ENV, "valueFrom": {"secretKeyRef": SECRET_REF}}, entries[0]


@pytest.mark.parametrize("component", NOT_HOLDERS)
def test_scheduler_and_dag_processor_do_not_get_it(values: dict[str, Any], component: str) -> None:
    assert KEY_ENV not in {e.get("name") for e in _env(values, component)}


@pytest.mark.parametrize("component", HOLDERS + NOT_HOLDERS)
def test_every_component_env_entry_is_one_the_chart_renders(values: dict[str, Any], component: str) -> None:
    for entry in _env(values, component):
        assert set(entry) in ({"name", "value"}, {"name", "valueFrom"}), entry
        if "valueFrom" in entry:
            (kind, ref), *more = entry["valueFrom"].items()
            assert not more and kind in ("secretKeyRef", "configMapKeyRef"), entry
            assert set(ref) == {"name", "key"}, entry


def test_the_helm_page_says_who_holds_it() -> None:
    text = " ".join(HELM_DOC.read_text().split()).lower()
    assert "only the workers, the triggerer and the api server get `[kueue] identity_key`" in text
