"""What a shard pod's credential may touch: its own task instance's checkpoints, nothing else (real SAS on
Azurite, real Secret and garbage collection on the cluster)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.exceptions import TaskDeferred
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import (
    AccountSasPermissions,
    BlobServiceClient,
    ContainerClient,
    ResourceTypes,
    generate_account_sas,
)

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.kueue.checkpoints.checkpoint_access import secret_name_of
from airflow_kueue_provider.kueue.checkpoints.ledger import ledger_prefix
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.names import CHECKPOINT_SAS_ENV, TASK_ID_LABEL
from airflow_kueue_provider.operators.checkpointing import Checkpointing, CheckpointSession
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.worker.shard import Shard
from devcluster.layout import AZURITE_KEY

from ..cluster import HOLD, KueueEnv, wait_for

CONN_ID = "kueue_blob_pods"


@pytest.fixture
def blob(devcluster_env: dict[str, str]) -> Iterator[SimpleNamespace]:
    conn_string = devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]
    os.environ[f"AIRFLOW_CONN_{CONN_ID.upper()}"] = json.dumps(
        {"conn_type": "wasb", "extra": {"connection_string": conn_string}}
    )
    base = f"pods-{uuid.uuid4().hex[:12]}"
    service = BlobServiceClient.from_connection_string(conn_string)
    yield SimpleNamespace(base=base, service=service)
    for container in service.list_containers(name_starts_with=base):
        with contextlib.suppress(Exception):
            service.delete_container(container.name)


def _operator(
    env: KueueEnv, blob: SimpleNamespace, task_id: str, credential_ttl: timedelta | None = None
) -> KueueIndexedJobOperator:
    ttl = {"credential_ttl": credential_ttl} if credential_ttl is not None else {}
    return KueueIndexedJobOperator(
        task_id=task_id,
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/shard:1",
        completions=2,
        annotations=HOLD,
        checkpointing=Checkpointing(CONN_ID, blob.base, **ttl),
    )


def _ti(task_id: str) -> SimpleNamespace:
    return SimpleNamespace(dag_id="creds", task_id=task_id, run_id="run-1", try_number=1, map_index=-1)


def _submit(env: KueueEnv, blob: SimpleNamespace, task_id: str) -> dict[str, Any]:
    """Run the operator up to its deferral: the Job and its Secret exist, the pods are held Running."""
    with pytest.raises(TaskDeferred):
        _operator(env, blob, task_id).execute({"ti": _ti(task_id)})  # type: ignore[arg-type]
    (job,) = [j for j in env.jobs() if j.metadata.labels.get(TASK_ID_LABEL) == task_id]
    return dict(env.cluster.api.sanitize_for_serialization(job))


def _pod_env(env: KueueEnv, job: dict[str, Any]) -> dict[str, str]:
    """The container env as the kubelet resolves it: literal values, and the Secret's key for the SAS."""
    resolved = {"JOB_COMPLETION_INDEX": "0"}
    for var in job["spec"]["template"]["spec"]["containers"][0]["env"]:
        if "value" in var:
            resolved[var["name"]] = var["value"]
        else:
            ref = var["valueFrom"]["secretKeyRef"]
            secret = env.cluster.core.read_namespaced_secret(ref["name"], env.namespace)
            resolved[var["name"]] = base64.b64decode(secret.data[ref["key"]]).decode()
    return resolved


def _refused(call: Any) -> int:
    try:
        call()
    except HttpResponseError as exc:
        return int(exc.status_code or 0)
    raise AssertionError("the pod's SAS was allowed to do this")


def test_a_pods_sas_reaches_its_own_checkpoints_only_and_goes_with_its_job(
    kueue_env: KueueEnv, blob: SimpleNamespace
) -> None:
    job_a, job_b = _submit(kueue_env, blob, "task-a"), _submit(kueue_env, blob, "task-b")
    pod_a, pod_b = _pod_env(kueue_env, job_a), _pod_env(kueue_env, job_b)
    assert pod_a["AIRFLOW_KUEUE_CHECKPOINT_URL"] != pod_b["AIRFLOW_KUEUE_CHECKPOINT_URL"]

    # 1. Its own checkpoints: written, read back, listed, pruned -- with the worker SDK, as a pod runs it.
    with Shard.from_env(pod_a, handle_sigterm=False) as shard:
        assert shard.load() is None
        for step in range(1, 5):
            assert shard.save({"next": step}) is not None
        assert shard.load() == {"next": 4}
        shard.mark_done({"items": 4})
        assert shard.is_done()

    # 2. Another task instance's checkpoints: 403 on read, write, list and delete.
    sas_a = pod_a[CHECKPOINT_SAS_ENV]
    account_url = "http://127.0.0.1:10000/devstoreaccount1"
    container_b = pod_b["AIRFLOW_KUEUE_CHECKPOINT_URL"].rsplit("/", 1)[1]
    with Shard.from_env(pod_b, handle_sigterm=False) as shard_b:
        shard_b.save({"next": 1})
    b_with_a = ContainerClient(account_url, container_b, credential=sas_a)
    b_blob = next(
        iter(BlobServiceClient(account_url, credential=_key()).get_container_client(container_b).list_blobs())
    )
    assert (
        _refused(lambda: b_with_a.upload_blob("dag/run/task/shards/0/x.json", b"{}", overwrite=True)) == 403
    )
    assert _refused(lambda: b_with_a.download_blob(b_blob.name).readall()) == 403
    assert _refused(lambda: list(b_with_a.list_blobs())) == 403
    assert _refused(lambda: b_with_a.delete_blob(b_blob.name)) == 403

    # 3. Every ledger (the base container): 403, its own task instance's included.
    ledger_name = f"{ledger_prefix('creds', 'run-1', 'task-a')}/ledger.json"
    assert blob.service.get_blob_client(blob.base, ledger_name).exists(), "the operator wrote the ledger"
    base_with_a = ContainerClient(account_url, blob.base, credential=sas_a)
    assert _refused(lambda: base_with_a.download_blob(ledger_name).readall()) == 403
    assert _refused(lambda: base_with_a.upload_blob(ledger_name, b"{}", overwrite=True)) == 403
    assert _refused(lambda: base_with_a.delete_blob(ledger_name)) == 403
    assert (
        _refused(
            lambda: (
                BlobServiceClient(account_url, credential=sas_a)
                .get_container_client("x" + blob.base)
                .create_container()
            )
        )
        == 403
    )

    # 4. No account key anywhere a pod (or a reader of the Job) could see it.
    secret_name = secret_name_of(job_a)
    assert secret_name is not None and secret_name.startswith(job_a["metadata"]["name"] + "-checkpoint-")
    secret = kueue_env.cluster.core.read_namespaced_secret(secret_name, kueue_env.namespace)
    for text in (json.dumps(job_a), json.dumps(job_b), json.dumps(pod_a), json.dumps(pod_b)):
        assert AZURITE_KEY not in text and "AccountKey" not in text
    assert [(o.kind, o.uid) for o in secret.metadata.owner_references] == [("Job", job_a["metadata"]["uid"])]

    # 5. The Secret goes with its Job (Kubernetes' garbage collector), and the SAS with it.
    kueue_env.cluster.batch.delete_namespaced_job(
        job_a["metadata"]["name"], kueue_env.namespace, propagation_policy="Background"
    )
    wait_for("the Job's Secret collected", lambda: not _exists(kueue_env, secret_name), timeout=60)


def _exists(env: KueueEnv, secret: str) -> bool:
    try:
        env.cluster.core.read_namespaced_secret(secret, env.namespace)
        return True
    except Exception as exc:
        if getattr(exc, "status", None) == 404:
            return False
        raise


def _key() -> dict[str, str]:
    return {"account_name": "devstoreaccount1", "account_key": AZURITE_KEY}


def test_a_connection_that_cannot_sign_fails_before_anything_is_created(
    kueue_env: KueueEnv, blob: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection holding only a SAS cannot mint a narrower one: the task fails, nothing is created."""
    token = generate_account_sas(
        blob.service.account_name,
        AZURITE_KEY,
        ResourceTypes(service=True, container=True, object=True),
        AccountSasPermissions(read=True, write=True, list=True, create=True, add=True, delete=True),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUEUE_BLOB_SAS_ONLY",
        json.dumps(
            {
                "conn_type": "wasb",
                "host": "http://127.0.0.1:10000/devstoreaccount1",
                "extra": {"sas_token": token},
            }
        ),
    )
    op = KueueIndexedJobOperator(
        task_id="sas-only",
        namespace=kueue_env.namespace,
        queue_name=kueue_env.local_queue,
        image="example.invalid/shard:1",
        completions=2,
        checkpointing=Checkpointing("kueue_blob_sas_only", blob.base),
    )
    ti = SimpleNamespace(dag_id="creds", task_id="sas-only", run_id="run-1", try_number=1, map_index=-1)
    with pytest.raises(AirflowFailException) as err:
        op.execute({"ti": ti})  # type: ignore[arg-type]
    assert "cannot sign a SAS" in str(err.value), str(err.value)
    assert "sig=" not in str(err.value)
    assert kueue_env.jobs() == []
    secrets = kueue_env.cluster.core.list_namespaced_secret(kueue_env.namespace).items
    assert not [s.metadata.name for s in secrets if "-checkpoint" in s.metadata.name]


def test_a_re_created_container_refuses_the_old_sas(kueue_env: KueueEnv, blob: SimpleNamespace) -> None:
    """The SAS points at its attempt's stored access policy: a container deleted and made again under the
    same name has none, so a SAS taken before (from an old Secret, a log, a pod) is worthless there."""
    job = _submit(kueue_env, blob, "task-old-sas")
    pod = _pod_env(kueue_env, job)
    sas = pod[CHECKPOINT_SAS_ENV]
    assert "si=" in sas and "se=" not in sas, "bound to a stored access policy, no rights of its own"
    account_url, name = pod["AIRFLOW_KUEUE_CHECKPOINT_URL"].rsplit("/", 1)
    with_old = ContainerClient(account_url, name, credential=sas)
    with_old.upload_blob("creds/run-1/task-old-sas/shards/0/a.json", b"{}", overwrite=True)  # valid now

    blob.service.delete_container(name)
    wait_for("the container made again", lambda: _recreated(blob.service, name), timeout=90)
    assert _refused(lambda: with_old.upload_blob("creds/run-1/x/shards/0/done.json", b"{}")) == 403
    assert _refused(lambda: list(with_old.list_blobs())) == 403


def _recreated(service: BlobServiceClient, name: str) -> bool:
    try:
        service.create_container(name)
        return True
    except HttpResponseError as exc:  # 409 ContainerBeingDeleted for a while
        if exc.status_code == 409:
            return False
        raise


class _WorkerDied(BaseException):
    """The worker process ends here (a BaseException: no cleanup of the operator catches it)."""


def test_reattach_after_a_crash_between_job_and_secret_creates_the_secret_and_records_the_attempt(
    kueue_env: KueueEnv, blob: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def die(*args: Any, **kwargs: Any) -> bool:
        raise _WorkerDied

    monkeypatch.setattr(CheckpointSession, "hand_pods_their_sas", die)
    with pytest.raises(_WorkerDied):
        _operator(kueue_env, blob, "task-crash").execute({"ti": _ti("task-crash")})  # type: ignore[arg-type]
    monkeypatch.undo()
    (job,) = [j for j in kueue_env.jobs() if j.metadata.labels.get(TASK_ID_LABEL) == "task-crash"]
    crashed = dict(kueue_env.cluster.api.sanitize_for_serialization(job))
    secret_name = secret_name_of(crashed)
    assert secret_name is not None and not _exists(kueue_env, secret_name), "its pods could never start"
    ledger_name = f"{ledger_prefix('creds', 'run-1', 'task-crash')}/ledger.json"
    assert _attempts(blob, ledger_name) == [], "the ledger never learnt it"

    # The same try, on a restarted worker: it reattaches to the Job ...
    with pytest.raises(TaskDeferred):
        _operator(kueue_env, blob, "task-crash").execute({"ti": _ti("task-crash")})  # type: ignore[arg-type]
    (again,) = [j for j in kueue_env.jobs() if j.metadata.labels.get(TASK_ID_LABEL) == "task-crash"]
    assert again.metadata.uid == crashed["metadata"]["uid"], "reattached, not a second Job"
    # ... its pods get their Secret (the name their env reads, owned by the Job) and a SAS that works ...
    secret = kueue_env.cluster.core.read_namespaced_secret(secret_name, kueue_env.namespace)
    assert [(o.kind, o.uid) for o in secret.metadata.owner_references] == [
        ("Job", crashed["metadata"]["uid"])
    ]
    with Shard.from_env(_pod_env(kueue_env, crashed), handle_sigterm=False) as shard:
        assert shard.save({"next": 1}) is not None
    # ... and the ledger records the attempt.
    assert _attempts(blob, ledger_name) == [(crashed["metadata"]["name"], IndexSet.range(0, 2), "running")]


def _attempts(blob: SimpleNamespace, ledger_name: str) -> list[tuple[str, IndexSet, str]]:
    client = blob.service.get_blob_client(blob.base, ledger_name)
    data = json.loads(client.download_blob().readall()) if client.exists() else {}
    return [(a["job_name"], IndexSet.parse(a["shards"]), a["status"]) for a in data.get("attempts", [])]


def test_a_job_that_outlives_credential_ttl_keeps_a_valid_sas_while_its_trigger_follows_it(
    kueue_env: KueueEnv, blob: SimpleNamespace
) -> None:
    """A Job may wait in its queue, or run, longer than ``credential_ttl``: while the trigger follows it, the
    stored access policy behind its pods' SAS moves to now + TTL every quarter of the TTL, so the SAS in the
    Secret (and in running pods) still works after the TTL has passed."""
    ttl = timedelta(seconds=24)
    operator = _operator(kueue_env, blob, "task-long-wait", credential_ttl=ttl)
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute({"ti": _ti("task-long-wait")})  # type: ignore[arg-type]
    (job,) = [j for j in kueue_env.jobs() if j.metadata.labels.get(TASK_ID_LABEL) == "task-long-wait"]
    pod = _pod_env(kueue_env, dict(kueue_env.cluster.api.sanitize_for_serialization(job)))
    account_url, name = pod["AIRFLOW_KUEUE_CHECKPOINT_URL"].rsplit("/", 1)
    container = ContainerClient(account_url, name, credential=pod[CHECKPOINT_SAS_ENV])
    signed = _latest_expiry(blob.service, name)

    trigger = deferred.value.trigger
    assert trigger.credential is not None, "an account-key SAS is renewed by the trigger"

    async def follow_past_the_ttl() -> None:
        with contextlib.suppress(asyncio.TimeoutError):  # held pods never finish: stop following
            await asyncio.wait_for(trigger.first_event(), timeout=ttl.total_seconds() + 8)

    asyncio.run(follow_past_the_ttl())
    assert datetime.now(UTC) > signed, "the SAS as signed has expired by now"
    assert _latest_expiry(blob.service, name) > signed + timedelta(seconds=5)
    container.upload_blob(
        "creds/run-1/task-long-wait/shards/0/done.json", b"{}", overwrite=True
    )  # still valid


def _latest_expiry(service: BlobServiceClient, name: str) -> datetime:
    identifiers = service.get_container_client(name).get_container_access_policy()["signed_identifiers"]
    expiries = [i.access_policy.expiry for i in identifiers if i.access_policy and i.access_policy.expiry]
    as_dates = [
        e if isinstance(e, datetime) else datetime.fromisoformat(str(e).replace("Z", "+00:00"))
        for e in expiries
    ]
    return max(d if d.tzinfo else d.replace(tzinfo=UTC) for d in as_dates)
