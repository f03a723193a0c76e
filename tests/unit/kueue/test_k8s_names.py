from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_kueue_provider.kueue.k8s_names import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_env_var_name,
    is_qualified_name,
    is_valid_label_value,
    safe_label_value,
)


@given(st.text(max_size=200))
def test_safe_label_value_is_valid_and_deterministic(value: str) -> None:
    safe = safe_label_value(value)
    assert is_valid_label_value(safe)
    assert safe == safe_label_value(value)
    if is_valid_label_value(value):
        assert safe == value


@given(st.text(min_size=1, max_size=100), st.text(min_size=1, max_size=100))
def test_safe_label_value_keeps_distinct_values_distinct(a: str, b: str) -> None:
    if a != b:
        assert safe_label_value(a) != safe_label_value(b)


def test_safe_label_value_examples() -> None:
    assert safe_label_value("nightly_genomics") == "nightly_genomics"
    long_id = "d" * 70
    hashed = safe_label_value(long_id)
    assert len(hashed) == 63 and hashed.startswith("d" * 52 + "-")
    assert re.fullmatch(r"[0-9a-f]{10}", safe_label_value(":::"))


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("team", True),
        ("example.com/team", True),
        ("kueue.x-k8s.io/queue-name", True),
        ("Example.com/team", False),
        ("/team", False),
        ("team/", False),
        ("a/b/c", False),
        ("x" * 64, False),
        ("bad key", False),
    ],
)
def test_is_qualified_name(key: str, valid: bool) -> None:
    assert is_qualified_name(key) is valid


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("a", True),
        ("align-shards-1", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("", False),
        ("-a", False),
        ("a-", False),
        ("A", False),
        ("a.b", False),
        (None, False),
    ],
)
def test_is_dns1123_label(value: object, valid: bool) -> None:
    assert is_dns1123_label(value) is valid


def test_is_dns1123_label_max_length() -> None:
    assert is_dns1123_label("a" * 52, 52)
    assert not is_dns1123_label("a" * 53, 52)


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("example.com", True),
        ("analytics-queue", True),
        ("a" * 253, True),
        ("a" * 254, False),
        ("example..com", False),
        (".example", False),
        ("Example.com", False),
        (3, False),
    ],
)
def test_is_dns1123_subdomain(value: object, valid: bool) -> None:
    assert is_dns1123_subdomain(value) is valid


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("", True),
        ("nightly_genomics", True),
        ("v1.2-x", True),
        ("x" * 63, True),
        ("x" * 64, False),
        ("_x", False),
        ("x.", False),
        ("a:b", False),
        (1, False),
    ],
)
def test_is_valid_label_value(value: object, valid: bool) -> None:
    assert is_valid_label_value(value) is valid


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("HOME", True),
        ("_x", True),
        ("my.var-1", True),
        ("1X", False),
        ("A=B", False),
        ("", False),
        (1, False),
    ],
)
def test_is_env_var_name(name: object, valid: bool) -> None:
    assert is_env_var_name(name) is valid
