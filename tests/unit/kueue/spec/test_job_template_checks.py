"""check_job_template: a template is an Indexed batch/v1 Job that does not forge the provider's identity."""

from __future__ import annotations

from typing import Any

from airflow_kueue_provider.kueue.spec.job_template_checks import check_job_template

from ..job_specs import template


def problems_of(job_template: Any) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    check_job_template(job_template, lambda parameter, text: found.append((parameter, text)))
    return found


def test_a_batch_v1_indexed_job_passes() -> None:
    assert problems_of(None) == []
    assert problems_of(template(completionMode="Indexed", template={"spec": {"containers": [{}]}})) == []


def test_anything_else_is_named_with_what_to_change() -> None:
    assert "it must be a batch/v1 Job" in problems_of({"apiVersion": "v1", "kind": "Pod"})[0][1]
    assert "set 'Indexed'" in problems_of(template(completionMode="NonIndexed"))[0][1]
    [(parameter, text)] = problems_of(template(template={"spec": {"containers": {}}}))
    assert parameter == "job_template" and "must be a list of container dicts" in text
    assert problems_of(["not", "a", "dict"]) == [("job_template", "got list: pass a batch/v1 Job as a dict")]


def test_a_template_may_not_set_the_provider_s_identity_or_queue_labels() -> None:
    forged = template(template={"metadata": {"labels": {"airflow-kueue.io/run-id": "someone-else"}}})
    forged["metadata"] = {
        "labels": {"app.kubernetes.io/managed-by": "airflow-kueue-provider"},
        "annotations": {"airflow-kueue.io/dag-id": "x"},
    }
    text = "\n".join(text for _, text in problems_of(forged))
    assert "metadata.labels sets app.kubernetes.io/managed-by" in text
    assert "metadata.annotations sets airflow-kueue.io/dag-id" in text
    assert "pod metadata.labels sets airflow-kueue.io/run-id" in text
