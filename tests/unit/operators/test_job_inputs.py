"""The Job kind's own inputs on their own: an alias pair takes one of its two names, the cncf provider's
Secrets merge into env, envFrom, volumes and mounts, and a bad topology or shard duration names itself."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client import V1EnvVar

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.operators.job_inputs import PodInputs, shard_duration_param, topology_param


def _parse(**given: Any) -> PodInputs:
    names = ("env", "env_vars", "resources", "container_resources", "secrets", "volumes", "volume_mounts")
    return PodInputs.parse("t", **{**dict.fromkeys((*names, "env_from")), **given})


@pytest.mark.parametrize(("name", "alias"), [("env", "env_vars"), ("resources", "container_resources")])
def test_an_alias_pair_takes_one_name(name: str, alias: str) -> None:
    with pytest.raises(AirflowFailException, match=f"t: set {name} or {alias} .the same thing., not both"):
        _parse(**{name: {"A": "1"}, alias: {"A": "1"}})
    assert _parse(**{alias: {"requests": {"cpu": "1"}}}) == _parse(**{name: {"requests": {"cpu": "1"}}})


def test_models_become_dicts_and_resources_are_the_jobs() -> None:
    pod = _parse(env_vars=[V1EnvVar(name="A", value="1")], container_resources={"limits": {"cpu": "2"}})
    assert pod.env == [{"name": "A", "value": "1"}]
    assert pod.job_resources == {"limits": {"cpu": "2"}}


def test_secrets_are_merged_after_what_was_given() -> None:
    secret = SimpleNamespace(
        deploy_type="env", key="password", to_env_secret=lambda: {"name": "PASSWORD", "valueFrom": {}}
    )
    pod = _parse(env={"A": "1"}, secrets=[secret])
    assert [item["name"] for item in pod.env] == ["A", "PASSWORD"]
    assert (pod.volumes, pod.volume_mounts, pod.env_from) == (None, None, None)


def test_keep_on_sets_each_as_an_attribute() -> None:
    target = SimpleNamespace()
    _parse(env={"A": "1"}).keep_on(target)
    assert sorted(vars(target)) == ["env", "env_from", "job_resources", "volume_mounts", "volumes"]


def test_a_bad_topology_or_shard_duration_names_the_task() -> None:
    with pytest.raises(AirflowFailException, match=r"^t: "):
        topology_param("t", {"nonsense": "zone"})
    with pytest.raises(AirflowFailException, match=r"^t: "):
        shard_duration_param("t", -5)
    assert topology_param("t", None) is None and shard_duration_param("t", None) is None
