"""check_metadata: label and annotation keys and values, and no label only the provider may set."""

from __future__ import annotations

from typing import Any

from airflow_kueue_provider.kueue.names import QUEUE_NAME_LABEL
from airflow_kueue_provider.kueue.spec.job_metadata_checks import check_metadata

from ..job_specs import spec


def problems_of(**overrides: Any) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    check_metadata(spec(**overrides), lambda parameter, text: found.append((parameter, text)))
    return found


def test_a_node_selector_may_use_a_label_the_provider_sets_on_jobs() -> None:
    assert problems_of(node_selector={QUEUE_NAME_LABEL: "q"}) == []
    [(parameter, text)] = problems_of(job_labels={QUEUE_NAME_LABEL: "q"})
    assert parameter == "job_labels" and "is set by the provider" in text


def test_a_parameter_that_is_not_a_dict_is_named_and_the_others_still_checked() -> None:
    found = problems_of(labels=["team"], annotations={"ok/key": 3})
    assert found == [
        ("labels", "got ['team']: pass a dict of key -> value"),
        ("annotations", "value of 'ok/key' is 3: annotation values must be strings"),
    ]
