"""The identity seal and the reattach rules over it (docs/tenancy.md, "Reattach and the identity seal")."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity, identity_of
from airflow_kueue_provider.kueue.identity.identity_seal import IdentitySeal, sealed_only
from airflow_kueue_provider.kueue.identity.job_ownership import needs_uid_seal, sort_by_seal
from airflow_kueue_provider.kueue.names import (
    JOBSET_NAME_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    SEAL_ANNOTATION,
    UID_SEAL_ANNOTATION,
)

SEAL = IdentitySeal(b"a key only Airflow holds")
TRY_2 = AirflowIdentity("nightly", "shards", "scheduled__2026-12-03T02:00:00+00:00", try_number=2)
TRY_1 = AirflowIdentity(TRY_2.dag_id, TRY_2.task_id, TRY_2.run_id, try_number=1)


def obj(
    identity: AirflowIdentity,
    name: str,
    *,
    kind: str = "Job",
    seal: IdentitySeal | None = SEAL,
    uid: str = "uid-1",
    uid_sealed: bool = True,
    finished: bool = False,
) -> dict[str, Any]:
    """An object as the provider creates it (sealed with ``seal``; None: unsealed, as a tenant makes one)."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "team-a",
        "uid": uid,
        "labels": {**identity.labels(), MANAGED_BY_LABEL: MANAGED_BY_VALUE},
        "annotations": identity.annotations(),
    }
    made = {"metadata": meta, "status": {}}
    if seal is not None:
        meta["annotations"].update(seal.annotations(kind, "team-a", name, identity))
        if uid_sealed:
            meta["annotations"].update(seal.uid_annotations(kind, made))
    if finished:
        made["status"]["conditions"] = [{"type": "Complete", "status": "True"}]
    return made


def test_the_seal_covers_kind_namespace_name_and_every_part_of_the_identity() -> None:
    base = SEAL.seal("Job", "team-a", "n", TRY_1)
    others = {
        SEAL.seal("JobSet", "team-a", "n", TRY_1),
        SEAL.seal("Job", "team-b", "n", TRY_1),
        SEAL.seal("Job", "team-a", "m", TRY_1),
        SEAL.seal("Job", "team-a", "n", TRY_2),
        SEAL.seal("Job", "team-a", "n", AirflowIdentity("x", "shards", TRY_1.run_id)),
        SEAL.seal("Job", "team-a", "n", AirflowIdentity("nightly", "x", TRY_1.run_id)),
        SEAL.seal("Job", "team-a", "n", AirflowIdentity("nightly", "shards", "manual__x")),
        SEAL.seal("Job", "team-a", "n", AirflowIdentity("nightly", "shards", TRY_1.run_id, map_index=0)),
        IdentitySeal(b"another key").seal("Job", "team-a", "n", TRY_1),
    }
    assert base not in others and len(others) == 9


def test_the_key_never_shows() -> None:
    assert "only Airflow" not in repr(SEAL) and "only Airflow" not in str(SEAL)
    with pytest.raises(ValueError, match="non-empty key"):
        IdentitySeal(b"")


def test_identity_of_reads_the_full_annotations_and_refuses_a_partial_set() -> None:
    assert identity_of(obj(TRY_2, "n")) == TRY_2
    broken = obj(TRY_2, "n")
    del broken["metadata"]["annotations"]["airflow-kueue.io/run-id"]
    assert identity_of(broken) is None
    broken["metadata"]["annotations"]["airflow-kueue.io/try-number"] = "x"
    assert identity_of(broken) is None and identity_of({}) is None


def test_a_forged_job_is_ignored_whatever_seal_it_carries() -> None:
    unsealed = obj(TRY_1, "forged", seal=None, finished=True)
    made_up = obj(TRY_1, "made-up", seal=IdentitySeal(b"a tenant's guess"), finished=True)
    moved = obj(TRY_1, "moved", finished=True)
    moved["metadata"]["name"] = "elsewhere"  # a valid seal copied onto another name
    renumbered = obj(TRY_1, "renumbered", finished=True)
    renumbered["metadata"]["annotations"]["airflow-kueue.io/try-number"] = "2"  # claims this try
    found = sort_by_seal([unsealed, made_up, moved, renumbered], TRY_2, SEAL, "Job", uid_sealed=True)
    assert found.ours == [] and found.unconfirmed == []
    assert [o["metadata"]["name"] for o in found.ignored] == ["forged", "made-up", "elsewhere", "renumbered"]


def test_this_try_s_job_is_adopted_with_its_name_seal_and_gets_its_uid_seal_if_missing() -> None:
    crashed = obj(TRY_2, "this-try", uid_sealed=False)
    found = sort_by_seal([crashed], TRY_2, SEAL, "Job", uid_sealed=True)
    assert found.ours == [crashed]
    assert needs_uid_seal(crashed, SEAL, "Job", uid_sealed=True)
    assert not needs_uid_seal(obj(TRY_2, "this-try"), SEAL, "Job", uid_sealed=True)
    assert not needs_uid_seal(crashed, SEAL, "JobSet", uid_sealed=False)


def test_an_earlier_try_s_job_needs_its_uid_seal() -> None:
    sealed = obj(TRY_1, "try-1", finished=True)
    copy_of = copy.deepcopy(sealed)
    copy_of["metadata"]["uid"] = "uid-of-the-copy"  # re-created under the name after the original went
    crashed_live = obj(TRY_1, "try-1-crashed", uid_sealed=False)
    crashed_done = obj(TRY_1, "try-1-crashed-done", uid_sealed=False, finished=True)
    found = sort_by_seal([sealed, copy_of, crashed_live, crashed_done], TRY_2, SEAL, "Job", uid_sealed=True)
    assert found.ours == [sealed]
    assert found.unconfirmed == [crashed_live]  # deleted by uid; this try submits its own
    assert found.ignored == [copy_of, crashed_done]


def test_a_jobset_kind_goes_by_its_name_seal_alone() -> None:
    earlier = obj(TRY_1, "js-try-1", kind="JobSet", uid_sealed=False, finished=True)
    assert sort_by_seal([earlier], TRY_2, SEAL, "JobSet", uid_sealed=False).ours == [earlier]
    assert sort_by_seal([earlier], TRY_2, SEAL, "Job", uid_sealed=True).ignored == [earlier]  # kind counts


def test_the_ui_shows_sealed_jobs_and_the_jobs_of_a_sealed_jobset_only() -> None:
    child = obj(TRY_1, "js-try-1-workers-0", seal=None)
    child["metadata"]["labels"][JOBSET_NAME_LABEL] = "js-try-1"
    child["metadata"]["annotations"][SEAL_ANNOTATION] = SEAL.seal("JobSet", "team-a", "js-try-1", TRY_1)
    stray = copy.deepcopy(child)
    stray["metadata"]["labels"][JOBSET_NAME_LABEL] = "another-jobset"
    own, forged = obj(TRY_1, "own"), obj(TRY_1, "forged", seal=None)
    assert sealed_only([own, forged, child, stray], SEAL, "Job") == [own, child]
    jobset = obj(TRY_1, "js-try-1", kind="JobSet", uid_sealed=False)
    assert sealed_only([jobset, forged], SEAL, "JobSet") == [jobset]


def test_a_uid_seal_over_another_uid_is_invalid() -> None:
    job = obj(TRY_1, "n")
    assert SEAL.uid_seal_state("Job", job) == "valid"
    job["metadata"]["uid"] = "other"
    assert SEAL.uid_seal_state("Job", job) == "invalid"
    del job["metadata"]["annotations"][UID_SEAL_ANNOTATION]
    assert SEAL.uid_seal_state("Job", job) == "missing"


def test_a_forecast_run_is_read_back_only_under_the_key_and_for_its_job() -> None:
    seal, other = IdentitySeal(b"airflow's key"), IdentitySeal(b"a tenant's guess")
    value = seal.forecast_run("team", "price-abc", 73)
    assert value.startswith("73:") and seal.read_forecast_run("team", "price-abc", value) == 73
    assert seal.read_forecast_run("team", "another-job", value) is None, "sealed for its own Job only"
    assert seal.read_forecast_run("other-team", "price-abc", value) is None
    assert seal.read_forecast_run("team", "price-abc", other.forecast_run("team", "price-abc", 73)) is None
    forged = "5:" + value.split(":")[1]  # the seal of 73 under another figure
    assert seal.read_forecast_run("team", "price-abc", forged) is None
    for junk in (None, 73, "", "73", "73:x:y", "-5:ab", "1e9:ab", "9999999999:ab"):
        assert seal.read_forecast_run("team", "price-abc", junk) is None
