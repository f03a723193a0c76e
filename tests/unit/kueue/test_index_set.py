from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_kueue_provider.kueue.index_set import IndexSet

small_sets = st.sets(st.integers(min_value=0, max_value=300), max_size=80)


def _interval_text(indexes: set[int]) -> str:
    """Format like the Kubernetes Job controller does, written independently of IndexSet."""
    parts: list[str] = []
    ordered = sorted(indexes)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        first, last = ordered[i], ordered[j]
        parts.append(
            str(first) if first == last else f"{first},{last}" if last == first + 1 else f"{first}-{last}"
        )
        i = j + 1
    return ",".join(parts)


# -- parse and format -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical", "count"),
    [
        ("0-3,7,9-11", "0-3,7,9-11", 8),
        ("", "", 0),
        ("0", "0", 1),
        # The Job controller writes a run of exactly two as "a,b" (orderedIntervals.String).
        ("4,5", "4,5", 2),
        ("4-5", "4,5", 2),
        ("4-6", "4-6", 3),
        ("1,3-5,7", "1,3-5,7", 5),
        ("0-2,3", "0-3", 4),
        ("5,3,4", "3-5", 3),
        ("0-5,3-8", "0-8", 9),
        ("9-11,0-3,7,7,2", "0-3,7,9-11", 8),
        (" 1 , 3 ", "1,3", 2),
        ("0-99999", "0-99999", 100_000),
    ],
)
def test_parse_and_format(text: str, canonical: str, count: int) -> None:
    parsed = IndexSet.parse(text)
    assert str(parsed) == canonical
    assert len(parsed) == count
    assert IndexSet.parse(str(parsed)) == parsed


def test_none_is_empty() -> None:
    assert IndexSet.parse(None) == IndexSet()
    assert not IndexSet.parse(None)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("3-1", "greater than its end"),
        ("a", "expected an index"),
        ("-1", "non-negative"),
        ("1,,2", "empty item 2"),
        ("1,", "empty item 2"),
        (",", "empty item 1"),
        ("1-", "expected an index"),
        ("1-2-3", "expected an index"),
        ("+1", "expected an index"),
        ("1.5", "expected an index"),
        ("0x1", "expected an index"),
        ("\u0661", "expected an index"),  # an Arabic-Indic digit: int() would accept it
    ],
)
def test_parse_rejects_bad_input(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment) as raised:
        IndexSet.parse(text)
    assert repr(text) in str(raised.value)


def test_kubernetes_with_ordered_indexes_example() -> None:
    # pkg/controller/job/indexed_job_utils_test.go: previous "1,3-5,7" plus new succeeded 2, 6, 8.
    assert str(IndexSet.parse("1,3-5,7") | IndexSet.from_indexes([2, 6, 8])) == "1-8"


# -- constructors -----------------------------------------------------------------------------------


def test_range_is_half_open() -> None:
    assert list(IndexSet.range(2, 5)) == [2, 3, 4]
    assert IndexSet.range(5, 5) == IndexSet()
    assert IndexSet.range(5, 2) == IndexSet()
    with pytest.raises(ValueError, match="negative"):
        IndexSet.range(-1, 3)


def test_constructor_rejects_bad_intervals() -> None:
    with pytest.raises(ValueError, match="negative"):
        IndexSet([(-2, 3)])
    with pytest.raises(ValueError, match="starts after it ends"):
        IndexSet([(3, 2)])
    with pytest.raises(ValueError, match="negative"):
        IndexSet.from_indexes([1, -1])


def test_min_max_and_errors_on_empty() -> None:
    indexes = IndexSet.parse("4,9-12")
    assert (indexes.min(), indexes.max()) == (4, 12)
    with pytest.raises(ValueError, match="empty"):
        IndexSet().min()
    with pytest.raises(ValueError, match="empty"):
        IndexSet().max()


def test_contains_ignores_non_ints() -> None:
    indexes = IndexSet.parse("0-3")
    assert 2 in indexes
    assert "2" not in indexes
    assert True not in indexes
    assert -1 not in indexes


def test_repr_round_trips() -> None:
    assert repr(IndexSet.parse("1,5-9")) == "IndexSet.parse('1,5-9')"


def test_operators_reject_other_types() -> None:
    with pytest.raises(TypeError):
        _ = IndexSet() | {1}  # type: ignore[operator]
    assert IndexSet() != set()


# -- properties against Python sets ---------------------------------------------------------------


@given(small_sets)
def test_from_indexes_matches_set(values: set[int]) -> None:
    indexes = IndexSet.from_indexes(values)
    assert list(indexes) == sorted(values)
    assert len(indexes) == len(values)
    assert bool(indexes) == bool(values)
    assert str(indexes) == _interval_text(values)
    if values:
        assert (indexes.min(), indexes.max()) == (min(values), max(values))


@given(small_sets)
def test_format_parse_round_trip(values: set[int]) -> None:
    indexes = IndexSet.from_indexes(values)
    assert IndexSet.parse(str(indexes)) == indexes


@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 40)), max_size=20))
def test_parse_accepts_unsorted_overlapping_ranges(ranges: list[tuple[int, int]]) -> None:
    text = ",".join(f"{start}-{start + width}" for start, width in ranges)
    expected = {i for start, width in ranges for i in range(start, start + width + 1)}
    assert set(IndexSet.parse(text)) == expected


@given(small_sets, small_sets)
def test_set_algebra_matches_python_sets(a: set[int], b: set[int]) -> None:
    left, right = IndexSet.from_indexes(a), IndexSet.from_indexes(b)
    assert set(left | right) == a | b
    assert set(left - right) == a - b
    assert set(left & right) == a & b
    assert len(left | right) == len(a | b)
    assert left.issubset(right) == a.issubset(b)
    assert left.isdisjoint(right) == a.isdisjoint(b)
    assert (left == right) == (a == b)
    # Results stay normalised: formatting them equals formatting the Python set.
    assert str(left - right) == _interval_text(a - b)
    assert str(left & right) == _interval_text(a & b)


@given(small_sets, st.integers(-5, 320))
def test_contains_matches_set(values: set[int], probe: int) -> None:
    assert (probe in IndexSet.from_indexes(values)) == (probe in values)


@given(small_sets)
def test_equal_sets_hash_equal(values: set[int]) -> None:
    assert hash(IndexSet.from_indexes(values)) == hash(IndexSet.parse(_interval_text(values)))


# -- cost ---------------------------------------------------------------------------------------------


def test_operations_are_proportional_to_intervals_not_indexes() -> None:
    huge = IndexSet.range(0, 10**15)
    started = time.perf_counter()
    assert len(huge) == 10**15
    assert len(huge - IndexSet.parse("7,10-20")) == 10**15 - 12
    assert 10**15 - 1 in huge
    assert str(huge & IndexSet.range(10**14, 10**14 + 3)) == f"{10**14}-{10**14 + 2}"
    assert time.perf_counter() - started < 0.1


def test_worst_case_100k_completion_job_is_cheap() -> None:
    completions = 100_000
    every_other = IndexSet.from_indexes(range(0, completions, 2))  # 50,000 intervals
    shifted = IndexSet.from_indexes(range(1, completions, 2))
    started = time.perf_counter()
    assert IndexSet.parse(str(every_other)) == every_other
    assert (every_other | shifted) == IndexSet.range(0, completions)
    assert len(IndexSet.range(0, completions) - every_other) == completions // 2
    assert not (every_other & shifted)
    assert time.perf_counter() - started < 2.0


@given(st.sets(st.integers(0, 300), max_size=60), st.data())
def test_select_picks_elements_by_rank(elements: set[int], data: st.DataObject) -> None:
    ordered = sorted(elements)
    ranks: set[int] = set()
    if ordered:
        ranks = data.draw(st.sets(st.integers(0, len(ordered) - 1), max_size=len(ordered)))
    selected = IndexSet.from_indexes(elements).select(IndexSet.from_indexes(ranks))
    assert list(selected) == sorted(ordered[r] for r in ranks)


def test_select_maps_retry_job_indexes_to_shards() -> None:
    remaining = IndexSet.parse("2,5,8")
    assert str(remaining.select(IndexSet.parse("0,2"))) == "2,8"
    assert str(IndexSet.parse("0-99999").select(IndexSet.parse("10-20"))) == "10-20"
    with pytest.raises(IndexError):
        remaining.select(IndexSet.parse("3"))
