"""A misspelt operator parameter fails with the parameters it may have meant, before anything is parsed."""

from __future__ import annotations

import pytest

from airflow_kueue_provider.kueue.errors import KueueProviderError
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator
from airflow_kueue_provider.operators.param_typos import UnknownParameter, did_you_mean


def test_a_typo_names_the_parameter_it_meant() -> None:
    with pytest.raises(UnknownParameter, match=r"max_failed_indexs: did you mean 'max_failed_indexes'\?"):
        KueueIndexedJobOperator(task_id="t", queue_name="q", image="i", max_failed_indexs=1)


def test_a_typo_of_an_airflow_parameter_and_several_at_once() -> None:
    with pytest.raises(UnknownParameter) as caught:
        KueueIndexedJobOperator(task_id="t", queue_name="q", image="i", retires=2, paralelism=4, zz_qq=1)
    text = str(caught.value)
    assert text.startswith("KueueIndexedJobOperator (task_id: t) has no parameters ")
    assert "retires: did you mean 'retries'?" in text
    assert "paralelism: did you mean 'parallelism'" in text
    assert "zz_qq: no parameter is close to it: see docs/parameters.md" in text
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, KueueProviderError)


def test_the_jobset_kind_gets_it_too() -> None:
    with pytest.raises(UnknownParameter, match=r"jobset_name_prefx: did you mean 'jobset_name_prefix'"):
        KueueJobSetOperator(task_id="t", queue_name="q", replicated_jobs=[], jobset_name_prefx="x")


def test_known_parameters_and_airflow_s_private_ones_pass() -> None:
    op = KueueIndexedJobOperator(
        task_id="t", queue_name="q", image="i", retries=1, max_failed_indexes=1, backoff_limit_per_index=0
    )
    assert op.retries == 1


def test_did_you_mean_lists_the_closest_few() -> None:
    assert did_you_mean("namspace", ["image", "namespace"]) == "did you mean 'namespace'?"
    assert did_you_mean("nam", ["name", "namespace", "image"]).startswith("did you mean 'name'")
