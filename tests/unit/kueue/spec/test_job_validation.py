"""validate(): every problem names the operator parameter to change."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.names import DAG_ID_LABEL, QUEUE_NAME_LABEL
from airflow_kueue_provider.kueue.spec.job_manifest import build_indexed_job
from airflow_kueue_provider.kueue.spec.job_spec import InvalidJobSpec
from airflow_kueue_provider.kueue.spec.job_validation import validate

from ..job_specs import spec, template

# -- validation: every row must name the parameter to change ---------------------------------------

INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("empty name", {"name": ""}, "name"),
    ("uppercase name", {"name": "AlignShards"}, "name"),
    ("underscore name", {"name": "align_shards"}, "name"),
    ("name over 52", {"name": "a" * 53}, "name"),
    ("name starts with dash", {"name": "-align"}, "name"),
    ("uppercase namespace", {"namespace": "Analytics"}, "namespace"),
    ("empty namespace", {"namespace": ""}, "namespace"),
    ("empty queue", {"queue_name": ""}, "queue_name"),
    ("queue with spaces", {"queue_name": "analytics queue"}, "queue_name"),
    ("queue over 63", {"queue_name": "q" * 64}, "queue_name"),
    ("zero completions", {"completions": 0}, "completions"),
    ("too many completions", {"completions": 100_001}, "completions"),
    ("bool completions", {"completions": True}, "completions"),
    ("string completions", {"completions": "10"}, "completions"),
    ("negative parallelism", {"parallelism": -1}, "parallelism"),
    ("parallelism over 10000", {"completions": 20_000, "parallelism": 10_001}, "parallelism"),
    ("parallelism over completions", {"parallelism": 11}, "parallelism"),
    ("unknown resources key", {"resources": {"request": {"cpu": "1"}}}, "resources"),
    ("quantity 'two'", {"resources": {"requests": {"cpu": "two"}}}, "resources"),
    ("negative quantity", {"resources": {"requests": {"memory": "-1Gi"}}}, "resources"),
    (
        "cpu limit below request",
        {"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "500m"}}},
        "resources",
    ),
    (
        "memory limit below request",
        {"resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}},
        "resources",
    ),
    ("requests not a dict", {"resources": {"requests": ["cpu"]}}, "resources"),
    ("claims not a list", {"resources": {"claims": "gpu"}}, "resources"),
    ("bad resource name", {"resources": {"requests": {"cpu cores": "1"}}}, "resources"),
    ("max failed without per-index backoff", {"max_failed_indexes": 2}, "max_failed_indexes"),
    (
        "max failed over completions",
        {"backoff_limit_per_index": 1, "max_failed_indexes": 11},
        "max_failed_indexes",
    ),
    ("negative per-index backoff", {"backoff_limit_per_index": -1}, "backoff_limit_per_index"),
    ("negative ttl", {"ttl_seconds_after_finished": -1}, "ttl_seconds_after_finished"),
    ("empty image", {"image": ""}, "image"),
    ("image with space", {"image": "python 3.12"}, "image"),
    ("env name starting with digit", {"env": {"1BAD": "x"}}, "env"),
    ("env name with '='", {"env": {"A=B": "x"}}, "env"),
    ("env value not a string", {"env": {"SHARDS": 3}}, "env"),
    ("env list item without name", {"env": [{"value": "x"}]}, "env"),
    ("env value and valueFrom", {"env": [{"name": "A", "value": "x", "valueFrom": {}}]}, "env"),
    ("cmds as one string", {"cmds": "python run.py"}, "cmds"),
    ("arguments not strings", {"arguments": [1, 2]}, "arguments"),
    ("template is a Pod", {"job_template": {"apiVersion": "v1", "kind": "Pod"}}, "job_template"),
    ("template NonIndexed", {"job_template": template(completionMode="NonIndexed")}, "job_template"),
    (
        "template containers not a list",
        {"job_template": template(template={"spec": {"containers": {}}})},
        "job_template",
    ),
    ("priority class with underscore", {"priority_class": "High_Priority"}, "priority_class"),
    ("bad label key", {"labels": {"bad key!": "v"}}, "labels"),
    ("label value over 63", {"labels": {"team": "x" * 64}}, "labels"),
    ("reserved queue label", {"labels": {QUEUE_NAME_LABEL: "other"}}, "labels"),
    ("reserved provider job label", {"job_labels": {DAG_ID_LABEL: "x"}}, "job_labels"),
    ("node selector value with space", {"node_selector": {"pool": "a b"}}, "node_selector"),
    ("annotation value not a string", {"annotations": {"fake/duration": 30}}, "annotations"),
    ("bad service account", {"service_account_name": "My_SA"}, "service_account_name"),
    ("identity without dag id", {"identity": AirflowIdentity("", "t", "r")}, "identity"),
    ("identity with negative try", {"identity": AirflowIdentity("d", "t", "r", try_number=-1)}, "identity"),
    ("spot not a bool", {"spot": "yes"}, "spot"),
    ("min parallelism zero", {"min_parallelism": 0}, "min_parallelism"),
    ("min parallelism at parallelism", {"parallelism": 4, "min_parallelism": 4}, "min_parallelism"),
    ("min parallelism not an int", {"min_parallelism": "2"}, "min_parallelism"),
]


@pytest.mark.parametrize(
    ("overrides", "parameter"), [row[1:] for row in INVALID], ids=[row[0] for row in INVALID]
)
def test_invalid_inputs_name_the_parameter(overrides: dict[str, Any], parameter: str) -> None:
    with pytest.raises(InvalidJobSpec) as raised:
        validate(spec(**overrides))
    assert raised.value.parameters == (parameter,), raised.value.problems
    assert f"- {parameter}: " in str(raised.value)
    # build_indexed_job validates too.
    with pytest.raises(InvalidJobSpec):
        build_indexed_job(spec(**overrides))


def test_all_problems_are_reported_at_once() -> None:
    with pytest.raises(InvalidJobSpec) as raised:
        validate(spec(name="Bad_Name", completions=0, image="", queue_name=""))
    assert set(raised.value.parameters) == {"name", "completions", "image", "queue_name"}
    assert isinstance(raised.value, ValueError)


def test_messages_say_what_to_change() -> None:
    with pytest.raises(InvalidJobSpec) as raised:
        validate(spec(max_failed_indexes=2))
    assert "set backoff_limit_per_index" in str(raised.value)
    with pytest.raises(InvalidJobSpec) as raised:
        validate(spec(resources={"requests": {"cpu": "1"}, "limits": {"cpu": "500m"}}))
    assert "limits.cpu ('500m') is below requests.cpu ('1')" in str(raised.value)


@pytest.mark.parametrize(
    "overrides",
    [
        {"parallelism": 0},
        {"completions": 100_000, "parallelism": 10_000},
        {"name": "a" * 52},
        {"ttl_seconds_after_finished": None},
        {"ttl_seconds_after_finished": 0},
        {"backoff_limit_per_index": 0, "max_failed_indexes": 10},
        {
            "resources": {
                "requests": {"cpu": "500m", "nvidia.com/gpu": 1},
                "limits": {"cpu": 1, "memory": "1Gi"},
            }
        },
        {"resources": {"claims": [{"name": "gpu"}]}},
        {"env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]},
        {"env": {"my.var-1": "x", "_X": ""}},
        {"labels": {"example.com/team": "genomics", "empty": ""}},
        {"job_template": template(completionMode="Indexed")},
    ],
)
def test_valid_edge_cases(overrides: dict[str, Any]) -> None:
    validate(spec(**overrides))
