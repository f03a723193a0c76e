"""The worker SDK as a real subprocess with exactly the env the operator injects, against Azurite.

The sample shard appends every processed item to a counter file: after a SIGTERM mid-shard and a restart,
each item must appear exactly once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_kueue_provider.hooks.blob_store import BlobStoreHook
from airflow_kueue_provider.hooks.ledger_store import LedgerStore
from airflow_kueue_provider.kueue.checkpoints.checkpoint_access import shard_container_name
from airflow_kueue_provider.kueue.checkpoints.ledger import RunLedger
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.operators.checkpointing import Checkpointing, CheckpointSession
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.storage.blob_store import BlobStore

PREFIX = "dag/run/task"
GRACE = 10.0
SALT = "5a17" * 8  # the salt of the task instance's shard container, as its ledger records it


@pytest.fixture
def base(devcluster_env: dict[str, str]) -> Iterator[str]:
    """A fresh base container (ledgers) and the Airflow connection the operator signs the pods' SAS with."""
    cs = devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]
    os.environ["AIRFLOW_CONN_SDK_BLOB"] = json.dumps(
        {"conn_type": "wasb", "extra": {"connection_string": cs}}
    )
    name = f"t-{uuid.uuid4().hex[:16]}"
    with BlobStoreHook("sdk_blob", name) as hook:  # the ledger a first try makes, with a known salt
        LedgerStore(hook, PREFIX).update(lambda _: RunLedger(4, container_salt=SALT))
    yield name
    for container in (name, shard_container_name(name, PREFIX, SALT)):
        with BlobStore.from_connection_string(cs, container) as hook, contextlib.suppress(Exception):
            hook.get_conn().delete_container()


@pytest.fixture
def store(base: str, devcluster_env: dict[str, str]) -> Iterator[BlobStore]:
    """The task instance's shard container, as the test reads it (with the account key)."""
    cs = devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]
    with BlobStore.from_connection_string(cs, shard_container_name(base, PREFIX, SALT)) as hook:
        yield hook


def pod_env(base: str, index: int, shards: str | None) -> dict[str, str]:
    """Exactly what the operator puts in a shard's container, with the secretKeyRef resolved as a kubelet
    would (the SAS the operator signed), plus what Kubernetes adds (JOB_COMPLETION_INDEX) and the PATH."""
    run = IndexSet.parse(shards) if shards is not None else IndexSet.range(0, 4)
    identity = AirflowIdentity("dag", "task", "run")  # the ledger prefix is dag/run/task = PREFIX
    op = KueueIndexedJobOperator(
        task_id="task",
        queue_name="lq",
        image="example.invalid/shard:1",
        completions=max(run.max() + 1, 4),
        job_template={
            "apiVersion": "batch/v1",
            "kind": "Job",
            "spec": {"template": {"spec": {"terminationGracePeriodSeconds": int(GRACE) + 5}}},
        },
    )
    session = CheckpointSession(Checkpointing("sdk_blob", base), identity, op.completions)
    manifest = session.shape_job(op.build_manifest(identity), run)
    token = session.prepare_pod_access()
    assert token is not None
    env = {"PATH": os.environ["PATH"], "JOB_COMPLETION_INDEX": str(index)}
    for var in manifest["spec"]["template"]["spec"]["containers"][0]["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            assert var["valueFrom"]["secretKeyRef"] == {
                "name": session.sas_secret_name(manifest["metadata"]["name"]),
                "key": "sas-token",
            }
            env[var["name"]] = token  # the kubelet reads the Secret
    assert env["AIRFLOW_KUEUE_CHECKPOINT_PREFIX"] == PREFIX and env["AIRFLOW_KUEUE_GRACE_SECONDS"] == str(
        int(GRACE)
    )
    assert "AZURE_STORAGE_CONNECTION_STRING" not in env
    return env


def sample(counter: Path, items: int, every: int, seconds: float) -> list[str]:
    return [
        sys.executable, "-m", "airflow_kueue_provider.worker.sample_shard",
        "--items", str(items), "--checkpoint-every", str(every),
        "--item-seconds", str(seconds), "--counter-file", str(counter),
    ]  # fmt: skip


def checkpoints(store: BlobStore, shard_id: int) -> dict[int, dict[str, object]]:
    found = {}
    for name, _ in store.list_names(f"{PREFIX}/shards/{shard_id}/checkpoint-"):
        doc, _ = store.read_json(name)
        assert doc is not None
        found[int(name.rsplit("-", 1)[1].removesuffix(".json"))] = doc
    return found


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_checkpoints_every_k_items_and_marks_done(base: str, store: BlobStore, tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    run = subprocess.run(
        sample(counter, items=12, every=4, seconds=0.01),
        env=pod_env(base, index=0, shards=None), cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert lines(counter) == [f"0:{i}" for i in range(12)]
    saved = checkpoints(store, 0)
    assert {seq: doc["state"] for seq, doc in saved.items()} == {
        1: {"next": 4},
        2: {"next": 8},
        3: {"next": 12},
    }
    assert {doc["reason"] for doc in saved.values()} == {"periodic"}
    done, _ = store.read_json(f"{PREFIX}/shards/0/done.json")
    assert done is not None and done["output"] == {"items": 12}


def test_sigterm_mid_shard_flushes_and_a_restart_resumes_without_repeating(
    base: str, store: BlobStore, tmp_path: Path
) -> None:
    counter, items = tmp_path / "counter", 40
    env = pod_env(base, index=1, shards="3,7")  # index 1 runs shard 7
    first = subprocess.Popen(
        sample(counter, items, every=5, seconds=0.05),
        env=env,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while len(lines(counter)) < 13 and time.monotonic() < deadline:  # past two periodic checkpoints
        time.sleep(0.02)
    assert first.poll() is None, first.stderr.read() if first.stderr else ""
    signalled = time.monotonic()
    first.send_signal(signal.SIGTERM)
    _, stderr = first.communicate(timeout=GRACE)
    took = time.monotonic() - signalled
    assert first.returncode == 143, stderr
    assert took < GRACE, f"exited {took:.1f}s after SIGTERM"
    assert os.environ["AZURE_STORAGE_CONNECTION_STRING"].split("AccountKey=")[1][:20] not in stderr
    assert env["AIRFLOW_KUEUE_CHECKPOINT_SAS"].split("sig=")[1][:12] not in stderr, "the SAS is not logged"

    processed = lines(counter)
    saved = checkpoints(store, 7)
    newest = saved[max(saved)]
    assert newest["reason"] == "sigterm" and newest["state"] == {"next": len(processed)}
    assert len(saved) <= 3, "old checkpoints are pruned"
    assert not checkpoints(store, 1) and not checkpoints(store, 3)

    second = subprocess.run(
        sample(counter, items, every=5, seconds=0.01), env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert f"resumes from checkpoint {max(saved)}" in second.stderr
    assert lines(counter) == [f"7:{i}" for i in range(items)], "every item exactly once, in order"
    assert store.read_json(f"{PREFIX}/shards/7/done.json")[0] is not None

    third = subprocess.run(
        sample(counter, items, every=5, seconds=0.01), env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert third.returncode == 0 and "already done" in third.stderr
    assert len(lines(counter)) == items


def test_a_duplicate_pod_of_a_done_shard_exits_0_without_redoing_it_unless_asked_to(
    base: str, store: BlobStore, tmp_path: Path
) -> None:
    counter, items = tmp_path / "counter", 10
    env = pod_env(base, index=2, shards=None)
    first = subprocess.run(
        sample(counter, items, every=5, seconds=0.01), env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    done, etag = store.read_json(f"{PREFIX}/shards/2/done.json")
    assert done is not None and lines(counter) == [f"2:{i}" for i in range(items)]

    # A second process of the same index (a retried pod, or Kubernetes' duplicate): the SDK sees done.json
    # and the process exits 0 before the program's first item; the first pod's record stays.
    duplicate = subprocess.run(
        sample(counter, items, every=5, seconds=0.01), env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert duplicate.returncode == 0, duplicate.stderr
    assert (
        "shard 2 (index 2) is already done" in duplicate.stderr and "starts at item" not in duplicate.stderr
    )
    assert len(lines(counter)) == items, "no item ran twice"
    assert store.read_json(f"{PREFIX}/shards/2/done.json")[1] == etag

    # Opted out: the shard runs again (from its last checkpoint, which is at the end: no item redone) and
    # its new record replaces the old one.
    redo = subprocess.run(
        [*sample(counter, items, every=5, seconds=0.01), "--redo-done"], env=env, cwd=tmp_path,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert redo.returncode == 0 and "starts at item" in redo.stderr, redo.stderr
    assert store.read_json(f"{PREFIX}/shards/2/done.json")[1] != etag
