"""The operator's checkpoint helpers that need no storage."""

from __future__ import annotations

import copy
import json
import re
from datetime import timedelta
from typing import Any

import pytest

from airflow_kueue_provider.hooks.ledger_store import LedgerStore
from airflow_kueue_provider.kueue.checkpoints.checkpoint_access import (
    CredentialRenewal,
    access_policy_head,
    secret_name_of,
    shard_container_name,
)
from airflow_kueue_provider.kueue.checkpoints.ledger import RunLedger
from airflow_kueue_provider.kueue.checkpoints.packing_choice import PackingChoice, ShardDuration
from airflow_kueue_provider.kueue.checkpoints.shard_packing import ShardPacks
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.operators import checkpointing
from airflow_kueue_provider.operators.checkpointing import Checkpointing, CheckpointSession, policy_of
from airflow_kueue_provider.operators.no_checkpointing import NoCheckpointing

from .blob_fakes import MemoryBlobs


@pytest.fixture(autouse=True)
def ledgers_in_memory(monkeypatch: pytest.MonkeyPatch) -> MemoryBlobs:
    """Every session's ledger in one in-memory account (sessions read their salt from it): no network."""
    blobs = MemoryBlobs()

    def store(hook: object, prefix: str) -> LedgerStore:
        return LedgerStore(blobs, prefix)  # type: ignore[arg-type]

    monkeypatch.setattr(checkpointing, "LedgerStore", store)
    return blobs


def _job(env: list[dict[str, object]]) -> dict[str, object]:
    return {"spec": {"template": {"spec": {"containers": [{"name": "main", "env": env}]}}}}


def test_job_shards_come_from_the_job_it_was_created_with() -> None:
    session = CheckpointSession(Checkpointing("blob"), AirflowIdentity("d", "t", "r"), 10)
    job = _job([{"name": "AIRFLOW_KUEUE_SHARDS", "value": "2,5,8"}])
    assert session.job_packs(job, IndexSet.range(0, 10)) == ShardPacks(IndexSet.parse("2,5,8"))
    assert session.job_packs(_job([]), IndexSet.range(0, 10)) == ShardPacks(IndexSet.range(0, 10))
    packed = _job(
        [
            {"name": "AIRFLOW_KUEUE_SHARDS", "value": "0-9"},
            {"name": "AIRFLOW_KUEUE_SHARDS_PER_POD", "value": "4"},
        ]
    )
    assert session.job_packs(packed, IndexSet()) == ShardPacks(IndexSet.range(0, 10), 4)
    assert NoCheckpointing(10).job_packs(packed, IndexSet.range(0, 10)) == ShardPacks(IndexSet.range(0, 10))


def aks_blob_with_workload_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """Connection ``aks_blob``: an AKS storage account reached through workload identity (no SAS)."""
    monkeypatch.setenv(
        "AIRFLOW_CONN_AKS_BLOB",
        json.dumps(
            {
                "conn_type": "wasb",
                "host": "https://genomicsdata.blob.core.windows.net",
                "extra": {"workload_identity_tenant_id": "00000000-0000-0000-0000-000000000000"},
            }
        ),
    )


def test_a_packed_session_shapes_one_index_per_pack(monkeypatch: pytest.MonkeyPatch) -> None:
    aks_blob_with_workload_identity(monkeypatch)
    config = Checkpointing("aks_blob", "checkpoints", workload_identity_service_account="sa")
    session = CheckpointSession(config, AirflowIdentity("d", "t", "r"), 10, PackingChoice(explicit=4))
    pod = {"spec": {"containers": [{"name": "main"}]}}
    manifest: dict[str, Any] = {
        "spec": {"completions": 10, "parallelism": 5, "maxFailedIndexes": 5, "template": pod}
    }

    shaped = session.shape_job(manifest, IndexSet.range(0, 10))["spec"]
    assert (shaped["completions"], shaped["parallelism"], shaped["maxFailedIndexes"]) == (3, 3, 3)
    env = {e["name"]: e["value"] for e in shaped["template"]["spec"]["containers"][0]["env"]}
    assert (env["AIRFLOW_KUEUE_SHARDS"], env["AIRFLOW_KUEUE_SHARDS_PER_POD"]) == ("0-9", "4")
    # A retry of 3 shards: one pod of 3 (the explicit setting, capped by what is left).
    retry = session.shape_job(copy.deepcopy(manifest), IndexSet.parse("2,5,8"))["spec"]
    assert retry["completions"] == 1
    env = {e["name"]: e["value"] for e in retry["template"]["spec"]["containers"][0]["env"]}
    assert (env["AIRFLOW_KUEUE_SHARDS"], env["AIRFLOW_KUEUE_SHARDS_PER_POD"]) == ("2,5,8", "3")


def test_a_skewed_range_shapes_decreasing_packs_into_the_pod_env(monkeypatch: pytest.MonkeyPatch) -> None:
    aks_blob_with_workload_identity(monkeypatch)
    config = Checkpointing("aks_blob", "checkpoints", workload_identity_service_account="sa")
    packing = PackingChoice(None, ShardDuration(1.0, 20.0), 20)
    session = CheckpointSession(config, AirflowIdentity("d", "t", "r"), 200, packing)
    pod = {"spec": {"containers": [{"name": "main"}]}}
    manifest: dict[str, Any] = {"spec": {"completions": 200, "parallelism": 20, "template": pod}}
    shaped = session.shape_job(manifest, IndexSet.range(0, 200))
    assert (shaped["spec"]["completions"], shaped["spec"]["parallelism"]) == (65, 20)
    env = {e["name"]: e["value"] for e in shaped["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["AIRFLOW_KUEUE_SHARDS_PER_POD"] == "5x24,4x5,3x7,2x10,1x19"
    assert session.job_packs(shaped, IndexSet()) == packing.packs(IndexSet.range(0, 200)), "read back"


def test_checkpointing_parameter_forms() -> None:
    assert Checkpointing.from_param(None) is None
    assert Checkpointing.from_param("blob") == Checkpointing(conn_id="blob")
    assert Checkpointing.from_param({"conn_id": "blob", "container": "ckpt"}) == Checkpointing("blob", "ckpt")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"container": "Checkpoints_2026"}, "not a valid Blob container name"),
        ({"container": "a--b"}, "not a valid Blob container name"),
        ({"credential_ttl": timedelta(days=8)}, "at most 7 days"),
        ({"credential_ttl": timedelta(0)}, "more than 0"),
    ],
)
def test_bad_checkpointing_settings_are_refused_with_what_to_change(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Checkpointing("blob", **kwargs)  # type: ignore[arg-type]


def test_pods_get_their_sas_from_the_jobs_own_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_KEY_BLOB",
        json.dumps(
            {"conn_type": "wasb", "login": "acct", "password": "a2V5", "host": "acct.blob.core.windows.net"}
        ),
    )
    session = CheckpointSession(Checkpointing("key_blob", "ckpt"), AirflowIdentity("d", "t", "r"), 4)
    manifest: dict[str, Any] = {
        "metadata": {"name": "d-t-abc-1", "namespace": "batch"},
        "spec": {"template": {"spec": {"containers": [{"name": "main"}]}}},
    }
    env = session.shape_job(manifest, IndexSet.range(0, 4))["spec"]["template"]["spec"]["containers"][0][
        "env"
    ]
    by_name = {e["name"]: e for e in env}
    secret_name = by_name["AIRFLOW_KUEUE_CHECKPOINT_SAS"]["valueFrom"]["secretKeyRef"]["name"]
    assert re.fullmatch(r"d-t-abc-1-checkpoint-[0-9a-f]{16}", secret_name), "not derivable from the Job"
    assert by_name["AIRFLOW_KUEUE_CHECKPOINT_SAS"] == {
        "name": "AIRFLOW_KUEUE_CHECKPOINT_SAS",
        "valueFrom": {"secretKeyRef": {"name": secret_name, "key": "sas-token"}},
    }
    again = session.shape_job(json.loads(json.dumps(manifest)), IndexSet.range(0, 4))
    assert secret_name_of(again) != secret_name, "each shaping draws a new suffix"
    url = by_name["AIRFLOW_KUEUE_CHECKPOINT_URL"]["value"]
    assert url.startswith("https://acct.blob.core.windows.net/ckpt-") and url.endswith(
        session.shard_container
    )
    assert not any("AZURE_STORAGE" in e["name"] for e in env)

    job = {**manifest, "metadata": {**manifest["metadata"], "uid": "u-1", "labels": {"a": "b"}}}
    job["spec"]["template"]["spec"]["containers"][0]["env"] = env
    secret = session.sas_secret(job, "sv=x&sig=y")
    assert secret["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "d-t-abc-1", "uid": "u-1"}
    ]
    assert secret["metadata"]["name"] == secret_name and secret["metadata"]["labels"] == {"a": "b"}
    assert secret["stringData"] == {"sas-token": "sv=x&sig=y"}


def test_workload_identity_pods_get_the_service_account_label_and_no_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    aks_blob_with_workload_identity(monkeypatch)
    config = Checkpointing("aks_blob", "checkpoints", workload_identity_service_account="genomics-sa")
    session = CheckpointSession(config, AirflowIdentity("nightly", "align", "scheduled__2026-11-30"), 1000)
    manifest: dict[str, Any] = {
        "spec": {
            "completions": 1000,
            "parallelism": 50,
            "template": {
                "metadata": {},
                "spec": {"terminationGracePeriodSeconds": 30, "containers": [{"name": "main"}]},
            },
        }
    }

    shaped = session.shape_job(manifest, IndexSet.parse("3,7,900-999"))

    pod = shaped["spec"]["template"]
    assert shaped["spec"]["completions"] == 102 and shaped["spec"]["parallelism"] == 50
    assert pod["spec"]["serviceAccountName"] == "genomics-sa"
    assert pod["metadata"]["labels"]["azure.workload.identity/use"] == "true"
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env == {
        "AIRFLOW_KUEUE_SHARDS": "3,7,900-999",
        "AIRFLOW_KUEUE_CHECKPOINT_URL": f"https://genomicsdata.blob.core.windows.net/{session.shard_container}",
        "AIRFLOW_KUEUE_CHECKPOINT_PREFIX": "nightly/scheduled__2026-11-30/align",
        "AIRFLOW_KUEUE_GRACE_SECONDS": "25",
    }

    # A retry of fewer shards than the partial-admission minimum runs them all at once (Kueue would refuse
    # a minimum that is not below the parallelism); one of more keeps it.
    minimum = {"kueue.x-k8s.io/job-min-parallelism": "20"}

    def with_minimum() -> dict[str, Any]:
        return {**copy.deepcopy(manifest), "metadata": {"annotations": dict(minimum)}}

    few = session.shape_job(with_minimum(), IndexSet.range(0, 12))
    assert few["spec"]["parallelism"] == 12 and few["metadata"]["annotations"] == {}
    many = session.shape_job(with_minimum(), IndexSet.range(0, 40))
    assert many["spec"]["parallelism"] == 40 and many["metadata"]["annotations"] == minimum


def test_a_result_without_the_ledger_is_still_in_shard_ids_of_this_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Blob Storage away at the end of a retry: the retry's Job index 0-2 ran shards 2,5,8, not 0-2."""
    from airflow_kueue_provider.kueue.progress.result import JobResult
    from airflow_kueue_provider.storage.blob_errors import BlobUnavailable

    session = CheckpointSession(
        Checkpointing("blob", "ckpt"), AirflowIdentity("d", "t", "r", try_number=2), 10
    )

    def unavailable() -> None:
        raise BlobUnavailable("Blob Storage did not answer")

    monkeypatch.setattr(session.ledger, "read", unavailable)
    job = _job([{"name": "AIRFLOW_KUEUE_SHARDS", "value": "2,5,8"}])
    result = JobResult(
        job_name="d-t-2", namespace="ns", workload_name=None, cluster_queue=None, completions=3,
        completed_indexes="0-2", failed_indexes="", succeeded=3, failed=0, queued_seconds=None,
        running_seconds=10.0, evictions=0,
    )  # fmt: skip

    out = session.result_without_ledger_write(job, result, "succeeded")

    assert out["completed_indexes"] == "2,5,8" and out["completions"] == 10 and out["ledger_written"] is False


class _Hook:
    """The Blob account hook's access-policy calls, recorded."""

    binds_sas_to_policy = True

    def __init__(self, extended: int) -> None:
        self.extended = extended
        self.calls: list[tuple[str, str]] = []

    def ensure_container(self, name: str, prefix: str, salt: str | None = None) -> None:
        self.calls.append(("ensure", name))

    def extend_access(self, name: str, head: str, start: object, expiry: object) -> int:
        self.calls.append(("extend", head))
        return self.extended

    def container_sas(self, name: str, start: object, expiry: object, policy: str | None) -> str:
        self.calls.append(("grant", str(policy)))
        return f"sv=x&si={policy}&sig=y"

    def revoke_access(self, name: str, head: str) -> int:
        self.calls.append(("revoke", head))
        return 1


class _Secrets:
    noun = "Job"

    def __init__(self, exists: bool) -> None:
        self.hook, self.exists, self.created = self, exists, []  # type: ignore[var-annotated]

    def create_secret(self, body: dict[str, Any]) -> bool:
        self.created.append(body)
        return not self.exists


def _reattach(monkeypatch: pytest.MonkeyPatch, *, exists: bool, extended: int, finished: bool = False):  # type: ignore[no-untyped-def]
    monkeypatch.setenv(
        "AIRFLOW_CONN_KEY_BLOB", json.dumps({"conn_type": "wasb", "login": "acct", "password": "a2V5"})
    )
    session = CheckpointSession(Checkpointing("key_blob", "ckpt"), AirflowIdentity("d", "t", "r"), 4)
    job: dict[str, Any] = {
        "metadata": {"name": "job-1", "namespace": "batch", "uid": "u-1"},
        "spec": {"template": {"spec": {"containers": [{"name": "main"}]}}},
    }
    session.shape_job(job, IndexSet.range(0, 4))
    hook = _Hook(extended)
    session.place.hook = hook  # type: ignore[assignment]
    if finished:
        job["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    client = _Secrets(exists)
    session.ensure_pod_access(client, job)  # type: ignore[arg-type]
    return hook.calls, client.created, job


def test_reattach_creates_the_secret_a_crashed_worker_never_made(monkeypatch: pytest.MonkeyPatch) -> None:
    calls, created, job = _reattach(monkeypatch, exists=False, extended=0)
    (secret,) = created
    assert secret["metadata"]["name"] == secret_name_of(job), "the name the Job's pods read"
    granted = [p for what, p in calls if what == "grant"]
    assert len(granted) == 1 and granted[0].startswith(access_policy_head("job-1"))
    assert policy_of(secret["stringData"]["sas-token"]) == granted[0]
    assert not [c for c in calls if c[0] == "revoke"]


def test_reattach_to_a_job_with_its_secret_refreshes_the_sas_and_drops_the_unused_policy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls, _created, _ = _reattach(monkeypatch, exists=True, extended=1)
    assert calls[0] == ("extend", access_policy_head("job-1"))
    granted = next(p for what, p in calls if what == "grant")
    assert calls[-1] == ("revoke", granted), "the new policy only, not the Job's live one"


def test_reattach_to_a_finished_job_needs_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    calls, created, _ = _reattach(monkeypatch, exists=False, extended=0, finished=True)
    assert calls == [] and created == []


def test_the_null_object_reattaches_with_nothing_to_do() -> None:
    assert NoCheckpointing(3).ensure_pod_access(None, {"metadata": {"name": "j"}}) is None  # type: ignore[arg-type, func-returns-value]


def test_policy_of_reads_the_si_field() -> None:
    assert policy_of("sv=2024&si=abc123&sr=c&sig=x") == "abc123"
    assert policy_of("sv=2024&se=2026&sig=x") is None and policy_of(None) is None


def test_a_credential_that_could_expire_in_the_queue_fails_when_the_dag_is_parsed() -> None:
    from airflow_kueue_provider.airflow_compat import AirflowFailException
    from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

    with pytest.raises(
        AirflowFailException,
        match=r"checkpointing: credential_ttl=2:00:00 is not longer than queue_timeout=3:00:00",
    ):
        KueueIndexedJobOperator(
            task_id="t",
            queue_name="lq",
            image="x:1",
            completions=2,
            queue_timeout=timedelta(hours=3),
            checkpointing=Checkpointing("blob", credential_ttl=timedelta(hours=2)),
        )
    assert Checkpointing.from_param("blob", queue_timeout=3600.0) == Checkpointing("blob")


def test_pods_mount_their_secret_as_a_file_the_kubelet_refreshes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_KEY_BLOB", json.dumps({"conn_type": "wasb", "login": "acct", "password": "a2V5"})
    )
    session = CheckpointSession(Checkpointing("key_blob", "ckpt"), AirflowIdentity("d", "t", "r"), 4)
    user_volume = {"name": "airflow-kueue-checkpoint-sas", "emptyDir": {}}  # a user's namesake goes
    pod_spec: dict[str, Any] = {
        "containers": [{"name": "main", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": [{"name": "data", "emptyDir": {}}, user_volume],
    }
    manifest = {"metadata": {"name": "job-1"}, "spec": {"template": {"spec": pod_spec}}}
    spec = session.shape_job(manifest, IndexSet.range(0, 4))["spec"]["template"]["spec"]
    secret = secret_name_of(manifest)
    assert spec["volumes"] == [
        {"name": "data", "emptyDir": {}},
        {
            "name": "airflow-kueue-checkpoint-sas",
            "secret": {"secretName": secret, "items": [{"key": "sas-token", "path": "sas-token"}]},
        },
    ]
    (container,) = spec["containers"]
    assert container["volumeMounts"] == [
        {"name": "data", "mountPath": "/data"},
        {
            "name": "airflow-kueue-checkpoint-sas",
            "mountPath": "/var/run/airflow-kueue/checkpoint",
            "readOnly": True,
        },
    ]
    env = {e["name"]: e for e in container["env"]}
    assert env["AIRFLOW_KUEUE_CHECKPOINT_SAS_FILE"]["value"] == "/var/run/airflow-kueue/checkpoint/sas-token"
    assert "AIRFLOW_KUEUE_CHECKPOINT_SAS" in env, "old SDKs (and local runs) still read the env var"


class _SecretsClient:
    noun = "Job"

    def __init__(self) -> None:
        self.hook = self

    def create_secret(self, body: dict[str, Any]) -> bool:
        return True


def _delegating(session: CheckpointSession, monkeypatch: pytest.MonkeyPatch) -> list[timedelta]:
    """The session's real hook on an AKS connection (an Azure identity), its Blob calls recorded."""
    windows: list[timedelta] = []

    def container_sas(name: str, start: Any, expiry: Any, policy_id: str | None = None) -> str:
        windows.append(expiry - start)
        return "sv=x&sig=y"

    monkeypatch.setattr(session.hook, "ensure_container", lambda *args: None)
    monkeypatch.setattr(session.hook, "container_sas", container_sas)
    return windows


def test_a_user_delegation_sas_is_short_and_re_signed_into_the_secret_by_the_trigger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    aks_blob_with_workload_identity(monkeypatch)
    session = CheckpointSession(Checkpointing("aks_blob", "ckpt"), AirflowIdentity("d", "t", "r"), 4)
    windows = _delegating(session, monkeypatch)
    job: dict[str, Any] = {
        "metadata": {"name": "job-1", "namespace": "batch"},
        "spec": {"template": {"spec": {"containers": [{"name": "main"}]}}},
    }
    session.shape_job(job, IndexSet.range(0, 4))
    assert session.trigger_credential("job-1") is None, "no Secret handed yet: nothing to write to"
    token = session.prepare_pod_access()
    assert windows == [timedelta(hours=1, minutes=5)], "1 h (and the clock-skew allowance), not 48 h"
    job["metadata"]["uid"] = "u-1"
    assert session.hand_pods_their_sas(_SecretsClient(), job, token)  # type: ignore[arg-type]
    renewal = CredentialRenewal.from_dict(session.trigger_credential("job-1") or {})
    assert renewal.resign and renewal.ttl_seconds == 3600 and renewal.every_seconds == 900
    assert (renewal.namespace, renewal.secret_name, renewal.owner_uid) == (
        "batch",
        secret_name_of(job),
        "u-1",
    )
    assert renewal.shard_container == session.shard_container

    short = Checkpointing("aks_blob", "ckpt", credential_ttl=timedelta(minutes=20))
    shorter = CheckpointSession(short, AirflowIdentity("d", "t", "r"), 4)
    assert shorter.signed_ttl == timedelta(minutes=20), "a shorter credential_ttl is kept"


def test_an_account_key_sas_keeps_its_policy_renewal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_KEY_BLOB", json.dumps({"conn_type": "wasb", "login": "acct", "password": "a2V5"})
    )
    session = CheckpointSession(Checkpointing("key_blob", "ckpt"), AirflowIdentity("d", "t", "r"), 4)
    renewal = CredentialRenewal.from_dict(session.trigger_credential("job-1") or {})
    assert not renewal.resign and renewal.policy_head == access_policy_head("job-1")
    assert renewal.ttl_seconds == timedelta(hours=48).total_seconds()


def _key_blob(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_KEY_BLOB", json.dumps({"conn_type": "wasb", "login": "acct", "password": "a2V5"})
    )


def test_a_first_try_draws_the_salt_with_the_ledger_and_every_later_session_reads_it(
    monkeypatch: pytest.MonkeyPatch, ledgers_in_memory: MemoryBlobs
) -> None:
    _key_blob(monkeypatch)
    config, identity = Checkpointing("key_blob", "ckpt"), AirflowIdentity("d", "t", "r")
    first = CheckpointSession(config, identity, 4)
    assert first.shard_container == shard_container_name("ckpt", "d/r/t"), "no ledger: nothing salted yet"
    first.remaining([])  # the first try: the ledger is created, with the salt
    salt = first.container_salt
    assert salt is not None and first.shard_container == shard_container_name("ckpt", "d/r/t", salt)
    ((doc, _),) = ledgers_in_memory.blobs.values()
    assert doc["container_salt"] == salt
    manifest = {"metadata": {"name": "j-1"}, "spec": {"template": {"spec": {"containers": [{"name": "m"}]}}}}
    env = {
        e["name"]: e
        for e in first.shape_job(manifest, IndexSet.range(0, 4))["spec"]["template"]["spec"]["containers"][0][
            "env"
        ]
    }
    assert env["AIRFLOW_KUEUE_CHECKPOINT_URL"]["value"].endswith("/" + first.shard_container)
    assert (
        CredentialRenewal.from_dict(first.trigger_credential("j-1") or {}).shard_container
        == first.shard_container
    )

    # The end of the deferred task (a new session, nothing written yet) and a retry: the same container.
    assert CheckpointSession(config, identity, 4).shard_container == first.shard_container
    retry = CheckpointSession(config, AirflowIdentity("d", "t", "r", try_number=2), 4)
    retry.remaining([])
    assert retry.shard_container == first.shard_container

    # The ledger deleted (a sweep) and a new first try: a new salt, a new container name.
    ledgers_in_memory.blobs.clear()
    again = CheckpointSession(config, identity, 4)
    again.remaining([])
    assert again.container_salt not in (None, salt) and again.shard_container != first.shard_container


def _two_sessions_of_one_try(monkeypatch: pytest.MonkeyPatch) -> tuple[CheckpointSession, CheckpointSession]:
    """Two sessions of one task try over one ledger (two workers, or a worker and its trigger)."""
    _key_blob(monkeypatch)
    config, identity = Checkpointing("key_blob", "ckpt"), AirflowIdentity("d", "t", "r")
    return CheckpointSession(config, identity, 4), CheckpointSession(config, identity, 4)


def test_two_first_tries_racing_to_create_the_ledger_agree_on_the_salt(
    monkeypatch: pytest.MonkeyPatch, ledgers_in_memory: MemoryBlobs
) -> None:
    one, two = _two_sessions_of_one_try(monkeypatch)
    real_read = ledgers_in_memory.read_json
    raced: list[str] = []

    def read_then_the_other_creates(name: str) -> tuple[dict[str, Any] | None, str | None]:
        seen = real_read(name)
        if not raced:  # ``two`` read "no ledger"; ``one`` creates it before ``two`` writes
            raced.append(name)
            one.remaining([])
        return seen

    monkeypatch.setattr(ledgers_in_memory, "read_json", read_then_the_other_creates)
    two.remaining([])
    assert raced and one.container_salt is not None
    assert two.container_salt == one.container_salt and two.shard_container == one.shard_container


def test_an_old_ledger_keeps_its_unsalted_container_and_a_jobset_gets_a_salted_one(
    monkeypatch: pytest.MonkeyPatch, ledgers_in_memory: MemoryBlobs
) -> None:
    _key_blob(monkeypatch)
    config = Checkpointing("key_blob", "ckpt")
    old = {"version": 1, "shard_count": 4, "completed": "", "attempts": []}  # written before salts
    ledgers_in_memory.write_json("d/r/t/ledger.json", old)
    session = CheckpointSession(config, AirflowIdentity("d", "t", "r", try_number=2), 4)
    assert session.remaining([])[1] is not None
    assert session.shard_container == shard_container_name("ckpt", "d/r/t"), "its checkpoints are there"
    assert "container_salt" not in ledgers_in_memory.read_json("d/r/t/ledger.json")[0]  # type: ignore[operator]

    # A JobSet records no attempt: shaping its pods makes the ledger that holds its salt.
    jobset = CheckpointSession(config, AirflowIdentity("d", "js", "r"), 4)
    manifest = {
        "kind": "JobSet",
        "metadata": {"name": "js-1"},
        "spec": {"template": {"spec": {"containers": [{"name": "m"}]}}},
    }
    jobset.shape_job(manifest, IndexSet.range(0, 4))
    stored = RunLedger.from_dict(ledgers_in_memory.read_json("d/r/js/ledger.json")[0] or {})
    assert stored.container_salt is not None and not stored.attempts
    assert CheckpointSession(
        config, AirflowIdentity("d", "js", "r"), 4
    ).shard_container == shard_container_name("ckpt", "d/r/js", stored.container_salt)


def test_an_attempts_end_is_recorded_then_its_sas_revoked_and_blob_trouble_costs_only_the_record(
    monkeypatch: pytest.MonkeyPatch, ledgers_in_memory: MemoryBlobs
) -> None:
    """The session's own step across its parts: the ledger (``AttemptLedger``), then the pods' access."""
    from airflow_kueue_provider.kueue.progress.result import JobResult
    from airflow_kueue_provider.storage.blob_errors import BlobUnavailable

    _key_blob(monkeypatch)
    session = CheckpointSession(Checkpointing("key_blob", "ckpt"), AirflowIdentity("d", "t", "r"), 4)
    hook = _Hook(extended=0)
    session.place.hook = hook  # type: ignore[assignment]
    session.record_attempt("job-1", ShardPacks(IndexSet.range(0, 4)))
    end = JobResult("job-1", "ns", None, None, 4, "0-3", "", 4, 0, None, 60.0, 0)
    event = {**end.to_dict(), "deadline": "07:00"}

    result, ledger = session.recorded_result(event, "succeeded", None, lambda name: None)

    assert ledger is not None and str(ledger.completed) == "0-3" and result["attempts"] == 1
    assert result["deadline"] == "07:00", "the deadline's keys are kept"
    assert hook.calls == [("revoke", access_policy_head("job-1"))], (
        "after the record, every policy of the Job"
    )

    def away(change: object) -> None:
        raise BlobUnavailable("Blob Storage did not answer")

    monkeypatch.setattr(session.ledger, "update", away)
    result, ledger = session.recorded_result(event, "succeeded", None, lambda name: None)
    assert ledger is None and result["ledger_written"] is False and result["completed_indexes"] == "0-3"
    assert len(hook.calls) == 1, "no record, no revoke: the policy expires on its own"


def test_a_first_try_reads_its_ledger_once_from_its_check_to_its_recorded_attempt(
    monkeypatch: pytest.MonkeyPatch, ledgers_in_memory: MemoryBlobs
) -> None:
    _key_blob(monkeypatch)
    session = CheckpointSession(Checkpointing("key_blob", "ckpt"), AirflowIdentity("d", "t", "r"), 4)
    assert not session.has_recorded_attempts()
    shards, _ = session.remaining([])
    session.record_attempt("j-1", PackingChoice().packs(shards))
    assert (ledgers_in_memory.reads, ledgers_in_memory.writes) == (1, 2), "writes start from what was seen"
    assert session.has_recorded_attempts()


def test_a_ledger_changed_after_it_was_kept_costs_a_fresh_read_and_loses_no_change(
    monkeypatch: pytest.MonkeyPatch, ledgers_in_memory: MemoryBlobs
) -> None:
    operator, trigger = _two_sessions_of_one_try(monkeypatch)
    operator.remaining([])  # created; the operator keeps what it wrote
    trigger.record_attempt("j-1", PackingChoice().packs(IndexSet.range(0, 2)))  # another writer, meanwhile
    reads = ledgers_in_memory.reads
    ledger = operator.record_attempt("j-2", PackingChoice().packs(IndexSet.range(2, 4)))
    assert ledgers_in_memory.reads == reads + 1, "the kept ETag lost (412): read again"
    assert {a.job_name for a in ledger.attempts} == {"j-1", "j-2"}


def test_a_ledger_deleted_after_it_was_kept_is_made_again_on_the_next_write(
    monkeypatch: pytest.MonkeyPatch, ledgers_in_memory: MemoryBlobs
) -> None:
    """The kept ETag's write fails with 412 on a blob that is gone (as Azure and Azurite answer an If-Match
    on a missing blob): the store reads again, finds none and creates it, with the attempt."""
    session, _ = _two_sessions_of_one_try(monkeypatch)
    session.remaining([])
    ledgers_in_memory.blobs.clear()  # a sweep, meanwhile
    ledger = session.record_attempt("j-1", PackingChoice().packs(IndexSet.range(0, 4)))
    assert [a.job_name for a in ledger.attempts] == ["j-1"]
    assert len(ledgers_in_memory.blobs) == 1
