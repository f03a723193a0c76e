"""Counted nouns in what the provider logs and returns: "1 pod", never "1 pods"."""

from __future__ import annotations

from airflow_kueue_provider.kueue.figures.attempt_figures import AttemptFigures, CostModel
from airflow_kueue_provider.kueue.figures.cost import VmPrice
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.job_progress import JobView, outcome_of
from airflow_kueue_provider.kueue.wording import counted


def test_counted() -> None:
    assert [counted(n, "pod") for n in (0, 1, 2)] == ["0 pods", "1 pod", "2 pods"]
    assert counted(1, "index") == "1 index" and counted(6, "index") == "6 indexes"
    assert counted(3, "attempt(s)", "attempts") == "3 attempts"


def test_cost_basis_says_1_pod() -> None:
    model = CostModel({"cpu": "4"}, VmPrice())
    one = AttemptFigures("j1", 1, 1.0, 10.0, False, 0.01)
    two = AttemptFigures("j2", 2, 1.0, 4.0, False, 0.01)
    assert model.basis([one, two]).startswith("1 pod x 10.0 s + 2 pods x 4.0 s of ")


def test_a_job_of_one_index_completed_its_1_index() -> None:
    done = {"type": "Complete", "status": "True"}
    one = JobView("j", "ns", 1, IndexSet.parse("0"), IndexSet(), 0, done, None, None)
    six = JobView("j", "ns", 6, IndexSet.range(0, 6), IndexSet(), 0, done, None, None)
    assert outcome_of(one, None).message == "Job ns/j completed its 1 index"  # type: ignore[union-attr]
    assert outcome_of(six, None).message == "Job ns/j completed all 6 indexes"  # type: ignore[union-attr]
