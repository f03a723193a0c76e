"""check_container and check_resources: the shard container's image, command, env and resources."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_kueue_provider.kueue.spec.container_checks import check_container, check_resources

from ..job_specs import spec


def container_problems(**overrides: Any) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    check_container(spec(**overrides), lambda parameter, text: found.append((parameter, text)))
    return found


def resource_problems(resources: Mapping[str, Any] | None) -> list[str]:
    found: list[str] = []
    check_resources(resources, lambda parameter, text: found.append(text))
    return found


def test_every_env_problem_is_reported_not_only_the_first() -> None:
    found = container_problems(
        env=[{"name": "1BAD", "value": 3}, "x", {"name": "A", "value": "", "valueFrom": {}}]
    )
    assert [parameter for parameter, _ in found] == ["env"] * 4
    assert "'1BAD' is not a valid variable name" in found[0][1]
    assert "value of '1BAD' is 3" in found[1][1]
    assert "item 1 ('x') is not an EnvVar dict" in found[2][1]
    assert "'A' sets both 'value' and 'valueFrom'" in found[3][1]


def test_an_image_and_a_command_in_shape_pass() -> None:
    assert container_problems(cmds=["python"], arguments=["run.py"], env={"A": "1"}) == []
    assert container_problems(image=None) == [
        ("image", "is empty: set the container image, e.g. 'ghcr.io/org/worker:1.2'")
    ]


def test_a_limit_is_compared_with_its_request_only_when_both_parse() -> None:
    assert resource_problems({"requests": {"cpu": "1"}, "limits": {"cpu": "500m"}}) == [
        "limits.cpu ('500m') is below requests.cpu ('1'): raise the limit or lower the request"
    ]
    [unparsable] = resource_problems({"requests": {"cpu": "two"}, "limits": {"cpu": "500m"}})
    assert unparsable.startswith("requests.cpu: ")
    assert resource_problems(None) == [] and resource_problems({"claims": [{"name": "gpu"}]}) == []
    assert resource_problems("1 cpu") == ["got '1 cpu': pass a dict like {'requests': {'cpu': '1'}}"]  # type: ignore[arg-type]
