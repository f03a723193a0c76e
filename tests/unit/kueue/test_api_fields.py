"""A missing or mistyped field of an API dict reads as empty instead of raising."""

from __future__ import annotations

from airflow_kueue_provider.kueue.api_fields import count, items, mapping, str_or_none, text


def test_wrong_types_read_as_empty() -> None:
    assert mapping([1]) == {} and mapping({"a": 1}) == {"a": 1}
    assert items({"a": 1}) == [] and items([1]) == [1]
    assert str_or_none("") is None and str_or_none(3) is None and str_or_none("q") == "q"
    assert text(None, "reason") is None and text({"reason": "Pending"}, "reason") == "Pending"


def test_a_count_is_an_int_but_never_a_bool() -> None:
    assert count(3) == 3
    assert count(True) == 0 and count("3") == 0 and count(None) == 0
