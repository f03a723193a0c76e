"""The AKS path's short-lived SAS, re-signed into the Job's Secret while the trigger follows it: on the real
apiserver, as the shipped worker/triggerer identity (deploy/rbac) under the shipped admission policies
(deploy/policy), with the SDK reading the SAS from the file a mounted Secret becomes (Azurite).

Azurite cannot sign a user-delegation SAS (that needs OAuth), so the test's signer hands the renewal an
account-key SAS with its own window, as a user-delegation one has; the signing itself is unit-tested
(tests/unit/hooks/test_pod_sas_signing.py). KWOK runs no kubelet: the test writes the Secret's value to the
file the kubelet would project.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.exceptions import TaskDeferred
from azure.storage.blob import BlobServiceClient, ContainerSasPermissions, generate_container_sas

from airflow_kueue_provider.hooks.async_secrets import replace_sas
from airflow_kueue_provider.kueue.checkpoints.checkpoint_access import CredentialRenewal, secret_name_of
from airflow_kueue_provider.kueue.names import (
    CHECKPOINT_SAS_ENV,
    CHECKPOINT_SAS_FILE_ENV,
    SAS_SECRET_KEY,
    SAS_VOLUME_NAME,
    TASK_ID_LABEL,
)
from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.triggers.credential_renewal import renewing
from airflow_kueue_provider.worker.shard import Shard
from devcluster.layout import AZURITE_KEY

from ..cluster import HOLD, Cluster, KueueEnv, wait_for
from ..deploy import test_policy
from ..deploy.test_rbac import Identity

CONN_ID = "kueue_blob_resigned"


@pytest.fixture
def blob(devcluster_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    conn_string = devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CONN_ID.upper()}",
        json.dumps({"conn_type": "wasb", "extra": {"connection_string": conn_string}}),
    )
    base = f"resign-{uuid.uuid4().hex[:12]}"
    service = BlobServiceClient.from_connection_string(conn_string)
    yield SimpleNamespace(base=base, service=service)
    for container in service.list_containers(name_starts_with=base):
        with contextlib.suppress(Exception):
            service.delete_container(container.name)


@pytest.fixture
def worker_under_guard(
    cluster: Cluster, kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Identity]:
    """The shipped worker/triggerer identity bound in the test's namespace, and the shipped policies in
    force there with that identity as the one checkpoint Secret writer (besides the bed's controllers)."""
    worker = Identity(cluster, "worker-triggerer.yaml", kueue_env.namespace, monkeypatch, tmp_path)
    writer = f"system:serviceaccount:{worker.account_namespace}:{worker.account}"
    monkeypatch.setitem(test_policy.BED_SITE, "checkpointSecretWriters", f"['devcluster-admin', '{writer}']")
    guard = test_policy.Guard(cluster, kueue_env.namespace)
    yield worker
    guard.delete()
    worker.delete()


def _secret_token(env: KueueEnv, name: str) -> str:
    secret = env.cluster.core.read_namespaced_secret(name, env.namespace)
    return base64.b64decode(secret.data[SAS_SECRET_KEY]).decode()


def _resolved_env(job: dict[str, Any]) -> dict[str, str]:
    env = {"JOB_COMPLETION_INDEX": "0"}
    for var in job["spec"]["template"]["spec"]["containers"][0]["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
    return env


def test_the_trigger_re_signs_the_pods_sas_into_their_secret_as_the_shipped_worker_identity(
    kueue_env: KueueEnv,
    blob: SimpleNamespace,
    worker_under_guard: Identity,
    tmp_path: Path,
) -> None:
    env = kueue_env
    operator = KueueIndexedJobOperator(
        task_id="resigned",
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/shard:1",
        completions=2,
        annotations=HOLD,
        checkpointing=Checkpointing(CONN_ID, blob.base),
        kubernetes_conn_id=worker_under_guard.conn_id,
    )
    ti = SimpleNamespace(dag_id="resign", task_id="resigned", run_id="run-1", try_number=1, map_index=-1)
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute({"ti": ti})  # type: ignore[arg-type]
    (listed,) = [j for j in env.jobs() if j.metadata.labels.get(TASK_ID_LABEL) == "resigned"]
    job = env.job(listed.metadata.name)
    assert job is not None
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]
    secret_name = secret_name_of(job)
    assert secret_name is not None

    # 1. The shaped Job, its Secret and its pods (the Secret mounted as a volume) pass the policies.
    pods = wait_for("the Job's pods, with the SAS volume", lambda: env.pods(name) or None, timeout=90)
    volumes = {v["name"]: v for v in pods[0]["spec"]["volumes"]}
    assert volumes[SAS_VOLUME_NAME]["secret"]["secretName"] == secret_name

    # 2. The trigger's renewal writes a new SAS into the Secret, as the worker identity (patch only).
    trigger = deferred.value.trigger
    shard_url = _resolved_env(job)["AIRFLOW_KUEUE_CHECKPOINT_URL"]
    shard_container = shard_url.rsplit("/", 1)[1]
    renewal = CredentialRenewal(
        CONN_ID, blob.base, shard_container, "", 60.0, True, env.namespace, secret_name, uid
    )
    handed = _secret_token(env, secret_name)
    signed: list[str] = []

    def sign(r: CredentialRenewal, start: datetime, expiry: datetime) -> str:
        token = generate_container_sas(
            "devstoreaccount1",
            r.shard_container,
            account_key=AZURITE_KEY,
            permission=ContainerSasPermissions.from_string("racwdl"),
            start=start,
            expiry=expiry,
        )
        signed.append(token)
        return token

    async def follow_briefly() -> None:
        async with renewing(renewal.to_dict(), f"Job {name}", target=trigger.target, sign=sign):
            for _ in range(200):
                await asyncio.sleep(0.1)
                if signed and _secret_token(env, secret_name) == signed[-1]:
                    return

    asyncio.run(follow_briefly())
    assert signed, "the renewal signed at once"
    assert _secret_token(env, secret_name) == signed[-1] != handed

    # 3. The SDK reads the SAS from the mounted file (the env var's copy is stale here) and works with it.
    sas_file = tmp_path / SAS_SECRET_KEY
    sas_file.write_text(_secret_token(env, secret_name))
    pod_env = {
        **_resolved_env(job),
        CHECKPOINT_SAS_ENV: "sv=2020-01-01&sig=stale",
        CHECKPOINT_SAS_FILE_ENV: str(sas_file),
    }
    with Shard.from_env(pod_env, handle_sigterm=False) as shard:
        for step in range(1, 6):  # past keep=3: pruning (a batch delete) runs with the file's SAS too
            assert shard.save({"next": step}) is not None
        assert shard.load() == {"next": 5}
        shard.mark_done({"items": 5})

    # 4. A Secret that is not the Job's (the owner-uid test fails) is never written.
    refused = asyncio.run(replace_sas(trigger.target, env.namespace, secret_name, "another-uid", "sv=x"))
    assert refused is False and _secret_token(env, secret_name) == signed[-1]
