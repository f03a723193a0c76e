"""The fault schedule: the same seed gives the same faults; bad parameters fail early, naming them."""

from __future__ import annotations

import itertools

import pytest

from tests.integration.soak.faults import FaultInjector, schedule

TARGETS = {"kube-apiserver": ["kube-apiserver"], "triggerer": ["triggerer-1", "triggerer-2"], "none": []}


def test_a_seed_replays_the_same_faults_whatever_the_order_of_the_kinds() -> None:
    first = list(itertools.islice(schedule(42, TARGETS), 50))
    again = list(itertools.islice(schedule(42, dict(reversed(TARGETS.items()))), 50))
    assert first == again
    assert first != list(itertools.islice(schedule(43, TARGETS), 50))
    assert {f.kind for f in first} == {"kube-apiserver", "triggerer"}  # a kind without targets is left out
    assert [f.seq for f in first] == list(range(50))


def test_gaps_are_exponential_around_their_mean_and_down_times_bounded() -> None:
    faults = list(itertools.islice(schedule(7, TARGETS, mean_gap=10, max_down=4), 2000))
    mean = sum(f.gap for f in faults) / len(faults)
    assert 9 < mean < 11
    assert all(0.5 <= f.down <= 4 for f in faults)


def test_bad_parameters_fail_early() -> None:
    with pytest.raises(ValueError, match="mean_gap=0"):
        next(schedule(1, TARGETS, mean_gap=0))
    with pytest.raises(ValueError, match="at least one fault kind"):
        next(schedule(1, {"none": []}))
    with pytest.raises(ValueError, match=r"\['triggerer'\] have no action"):
        FaultInjector(1, {"kube-apiserver": object()}, TARGETS, 10, log=None)  # type: ignore[arg-type,dict-item]
