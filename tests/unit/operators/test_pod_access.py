"""The pods' access to their shard container: the SAS, its Secret, refresh, revoke and renewal."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from airflow_kueue_provider.kueue.checkpoints.checkpoint_access import CredentialRenewal, access_policy_head
from airflow_kueue_provider.operators.checkpoint_config import Checkpointing
from airflow_kueue_provider.operators.pod_access import PodAccess, hand_over_secret, policy_of
from airflow_kueue_provider.storage.blob_errors import BlobUnavailable

from .blob_fakes import AccountHook, place


class _Client:
    """What handing over a Secret uses of a kind's client: create the Secret, delete the object."""

    noun = "Job"

    def __init__(self, answer: bool | Exception) -> None:
        self.hook, self.answer = self, answer
        self.created: list[dict[str, Any]] = []
        self.deleted: list[tuple[str, str, str | None]] = []

    def create_secret(self, body: dict[str, Any]) -> bool:
        if isinstance(self.answer, Exception):
            raise self.answer
        self.created.append(body)
        return self.answer

    def delete_unless_finished(self, namespace: str, name: str, uid: str | None = None) -> str:
        self.deleted.append((namespace, name, uid))
        return "deleted"


def _shaped(access: PodAccess, name: str = "job-1") -> dict[str, Any]:
    """A Job whose pods read the Secret ``access`` names for it (as shaping writes their env)."""
    access.shaping(name, "Job")
    env = access.secret_env(name, "Job")
    return {
        "metadata": {"name": name, "namespace": "batch", "uid": "u-1"},
        "spec": {"template": {"spec": {"containers": [{"name": "main", "env": env}]}}},
    }


def test_each_shaping_names_a_new_secret_the_pods_env_reads() -> None:
    access = PodAccess(place())
    job = _shaped(access)
    first = access.sas_secret_name("job-1")
    assert re.fullmatch(r"job-1-checkpoint-[0-9a-f]{16}", first)
    ref = job["spec"]["template"]["spec"]["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": first, "key": "sas-token"}
    _shaped(access)
    assert access.sas_secret_name("job-1") != first, "not derivable from the Job's name"
    assert access.secret_env(None, "Job") == [], "an unnamed object gets no Secret"


def test_workload_identity_pods_get_the_container_and_no_credential() -> None:
    hook = AccountHook()
    config = Checkpointing("blob", "ckpt", workload_identity_service_account="sa")
    access = PodAccess(place(hook, config))
    assert access.prepare_pod_access("job-1") is None
    assert [what for what, _ in hook.calls] == ["ensure"], "the container is made, nothing is signed"
    assert access.secret_env("job-1", "Job") == [] and access.trigger_credential("job-1") is None
    client = _Client(True)
    assert (
        not access.hand_pods_their_sas(client, {"metadata": {"name": "job-1"}}, None)  # type: ignore[arg-type]
        and not client.created
    )


def test_an_account_key_sas_is_bound_to_a_new_policy_of_the_job_and_revoked_by_its_head() -> None:
    hook = AccountHook()
    access = PodAccess(place(hook))
    _shaped(access)
    token = access.prepare_pod_access()
    policy = policy_of(token)
    assert policy is not None and policy.startswith(access_policy_head("job-1")), "the Job shaped last"
    access.revoke_pod_access("job-1")
    assert hook.calls[-1] == ("revoke", access_policy_head("job-1")), "every policy of the Job"
    renewal = CredentialRenewal.from_dict(access.trigger_credential("job-1") or {})
    assert not renewal.resign and renewal.policy_head == access_policy_head("job-1")


def test_a_revoke_that_fails_costs_the_revoke_not_the_task(caplog: pytest.LogCaptureFixture) -> None:
    hook = AccountHook()
    hook.revoke_error = BlobUnavailable("away")
    with caplog.at_level(logging.WARNING):
        PodAccess(place(hook)).revoke_pod_access("job-1")
    assert "could not revoke the SAS of job-1" in caplog.text


def test_a_user_delegation_sas_is_renewed_into_the_secret_handed_to_the_pods() -> None:
    access = PodAccess(place(AccountHook(binds_sas_to_policy=False)))
    job = _shaped(access)
    assert access.trigger_credential("job-1") is None, "no Secret handed yet: nothing to write to"
    client = _Client(True)
    assert access.hand_pods_their_sas(client, job, "sv=x&sig=y")  # type: ignore[arg-type]
    (secret,) = client.created
    assert secret["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "job-1", "uid": "u-1"}
    ]
    renewal = CredentialRenewal.from_dict(access.trigger_credential("job-1") or {})
    assert renewal.resign and (renewal.namespace, renewal.secret_name, renewal.owner_uid) == (
        "batch",
        secret["metadata"]["name"],
        "u-1",
    )


def test_a_secret_that_cannot_be_made_takes_its_object_with_it() -> None:
    job = {"metadata": {"name": "job-1", "namespace": "batch", "uid": "u-1"}}
    failing = _Client(RuntimeError("403 forbidden"))
    with pytest.raises(RuntimeError, match="403"):
        hand_over_secret(failing, job, lambda: {"metadata": {"name": "s"}})  # type: ignore[arg-type]
    assert failing.deleted == [("batch", "job-1", "u-1")]
    exists = _Client(False)
    assert not hand_over_secret(exists, job, lambda: {"metadata": {"name": "s"}})  # type: ignore[arg-type]
    assert exists.deleted == [], "an earlier worker's Secret is kept, and so is the object"


def test_an_unshaped_object_has_no_secret_to_hand_over() -> None:
    client = _Client(True)
    unshaped = {"metadata": {"name": "job-1", "namespace": "batch", "uid": "u-1"}, "spec": {}}
    with pytest.raises(ValueError, match="job-1: its pods read no AIRFLOW_KUEUE_CHECKPOINT_SAS Secret"):
        PodAccess(place()).hand_pods_their_sas(client, unshaped, "sv=x&sig=y")  # type: ignore[arg-type]
    assert client.deleted == [("batch", "job-1", "u-1")], "its pods could never checkpoint"
