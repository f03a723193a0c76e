from __future__ import annotations

from decimal import Decimal

import pytest

from airflow_kueue_provider.kueue.quantity import is_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),
        ("1", Decimal(1)),
        ("1.5", Decimal("1.5")),
        (".5", Decimal("0.5")),
        ("5.", Decimal(5)),
        ("2Gi", Decimal(2 * 1024**3)),
        ("512Mi", Decimal(512 * 1024**2)),
        ("1Ki", Decimal(1024)),
        ("1Ei", Decimal(1024**6)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("1e-3", Decimal("0.001")),
        ("1E", Decimal(10**18)),  # exa, not an exponent
        ("2k", Decimal(2000)),
        ("3M", Decimal(3_000_000)),
        ("100n", Decimal("0.0000001")),
        ("10u", Decimal("0.00001")),
        ("+2", Decimal(2)),
        ("-1", Decimal(-1)),
        ("0", Decimal(0)),
        (2, Decimal(2)),
        (0.25, Decimal("0.25")),
    ],
)
def test_parse(text: str | int | float, value: Decimal) -> None:
    assert parse_quantity(text) == value
    assert is_quantity(text)


@pytest.mark.parametrize(
    "text",
    [
        "two",
        "",
        "1.5.1",
        "1e",
        "1Kb",
        "1 Gi",
        "Gi",
        "1gi",
        "1K",
        "1mi",
        "--1",
        "1e3.5",
        True,
        None,
        [1],
        float("nan"),
    ],
)
def test_rejects(text: object) -> None:
    with pytest.raises(ValueError, match="quantity"):
        parse_quantity(text)
    assert not is_quantity(text)


def test_out_of_range_exponent_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="out of range"):
        parse_quantity("1e99999999")


def test_comparison_across_suffixes() -> None:
    assert parse_quantity("1500m") > parse_quantity("1")
    assert parse_quantity("1Gi") > parse_quantity("1G")
    assert parse_quantity("1024Mi") == parse_quantity("1Gi")
