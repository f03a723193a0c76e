"""Field ownership of declared queues (pure): the apply's changes named (a removed field as removed), the
conflicts of a 409 read, and the one-time adoption of client-side fields."""

from __future__ import annotations

from airflow_kueue_provider.kueue.identity.queue_ownership import (
    FieldConflict,
    adopted_managed_fields,
    applied_changes,
    conflicts_of,
    previous_managers_in,
)

ME = "airflow-kueue-provider-queues"


def test_a_field_the_declaration_no_longer_sets_is_named_as_removed() -> None:
    declared = {"metadata": {"name": "cq"}, "spec": {"namespaceSelector": {}, "cohortName": "team"}}
    live = {
        "spec": {"namespaceSelector": {}, "cohortName": "old", "stopPolicy": "Hold", "queueingStrategy": "X"}
    }
    result = {
        "spec": {"namespaceSelector": {}, "cohortName": "team", "stopPolicy": "None", "queueingStrategy": "X"}
    }
    assert applied_changes(live, result, declared, ("spec",)) == [
        "spec.cohortName: declared 'team', live 'old'",
        "spec.stopPolicy: removed from the declaration, live 'Hold' (the apply leaves 'None')",
    ]
    del result["spec"]["stopPolicy"]
    assert applied_changes(live, result, declared, ("spec",))[1].endswith("(the apply removes it)")
    assert applied_changes(result, result, declared, ("spec",)) == [], "in sync"


def test_labels_and_top_level_fields_are_compared_too() -> None:
    declared = {"metadata": {"labels": {"team": "a"}}, "value": 500}
    live = {"metadata": {"labels": {"team": "b", "other": "kept"}}, "value": 500, "description": "old"}
    result = {"metadata": {"labels": {"team": "a", "other": "kept"}}, "value": 500}
    assert applied_changes(live, result, declared, ("value", "description")) == [
        "description: removed from the declaration, live 'old' (the apply removes it)",
        "metadata.labels.team: declared 'a', live 'b'",
    ]


def test_the_conflicts_of_a_409_name_the_field_and_its_manager() -> None:
    status = {
        "code": 409,
        "details": {
            "causes": [
                {
                    "reason": "FieldManagerConflict",
                    "message": 'conflict with "kubectl-edit" using kueue.x-k8s.io/v1beta2',
                    "field": ".spec.stopPolicy",
                },
                {"reason": "FieldValueInvalid", "message": "x", "field": ".spec"},
            ]
        },
    }
    assert conflicts_of(status) == (FieldConflict("spec.stopPolicy", "kubectl-edit"),)
    assert str(conflicts_of(status)[0]) == "spec.stopPolicy (owned by kubectl-edit)"
    assert conflicts_of({"code": 409}) == ()


def test_client_side_fields_are_merged_into_this_managers_apply_entry() -> None:
    managed = [
        {
            "manager": "OpenAPI-Generator",
            "operation": "Update",
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {".": {}, "f:stopPolicy": {}, "f:namespaceSelector": {}}},
            "time": "2026-01-02T00:00:00Z",
        },
        {
            "manager": "kueue",
            "operation": "Update",
            "subresource": "status",
            "fieldsV1": {"f:status": {}},
        },
        {"manager": "kubectl-edit", "operation": "Update", "fieldsV1": {"f:spec": {"f:cohortName": {}}}},
        {
            "manager": ME,
            "operation": "Apply",
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "fieldsV1": {"f:spec": {"f:resourceGroups": {}}},
            "time": "2026-01-01T00:00:00Z",
        },
    ]
    previous = ("kubectl-client-side-apply", "OpenAPI-Generator")
    adopted = adopted_managed_fields(managed, previous, ME)
    assert adopted is not None
    assert [m["manager"] for m in adopted] == ["kueue", "kubectl-edit", ME], "only the previous managers go"
    mine = adopted[-1]
    assert mine["fieldsV1"] == {
        "f:spec": {"f:resourceGroups": {}, ".": {}, "f:stopPolicy": {}, "f:namespaceSelector": {}}
    }
    assert mine["time"] == "2026-01-02T00:00:00Z"
    assert previous_managers_in(managed, previous) == ["OpenAPI-Generator"]
    assert adopted_managed_fields(adopted, previous, ME) is None, "nothing left to adopt"
    fresh = adopted_managed_fields(managed[:1], previous, ME)
    assert fresh == [
        {
            "manager": ME,
            "operation": "Apply",
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "fieldsType": "FieldsV1",
            "fieldsV1": managed[0]["fieldsV1"],
            "time": "2026-01-02T00:00:00Z",
        }
    ]
