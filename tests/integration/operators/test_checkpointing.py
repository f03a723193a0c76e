"""Blob checkpoints and the run ledger with the operator, on the real cluster and Azurite."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.hooks.kind_client import KindClient
from airflow_kueue_provider.kueue.checkpoints.checkpoint_access import shard_container_name
from airflow_kueue_provider.kueue.checkpoints.ledger import ledger_prefix
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.kinds.job import JOB
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from devcluster import procs
from devcluster.components import components
from devcluster.layout import AZURITE_KEY, Layout

from ..airflow_runner import AirflowHome
from ..cluster import KueueEnv, short_id, wait_for
from .conftest import CONN_ID, read_ledger
from .test_indexed_job_queueing import returned_result

RETRY_DAG = """
from datetime import datetime, timedelta
from airflow.sdk import DAG
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    KueueIndexedJobOperator(
        task_id="shards", namespace={namespace!r}, queue_name="lq", image="example.invalid/shard:1",
        completions=10, parallelism={parallelism}, backoff_limit_per_index=0,
        retries=1, retry_delay=timedelta(seconds=1),
        resources={{"requests": {{"cpu": "250m", "memory": "256Mi"}}}},
        annotations={{
            "kwok.airflow-kueue.io/run-duration": {run_duration!r}, "kwok.airflow-kueue.io/hold": {hold!r},
            "kwok.airflow-kueue.io/fail-indexes": "{{{{ {fail!r} if ti.try_number == 1 else '' }}}}",
        }},
        checkpointing={{"conn_id": {conn_id!r}, "container": {container!r}}},
    )
"""


def test_retry_runs_only_the_unfinished_shards_and_the_result_covers_all(
    kueue_env: KueueEnv, airflow_home: AirflowHome, blob: SimpleNamespace
) -> None:
    airflow_home.write_dag(
        "resume",
        RETRY_DAG.format(
            dag_id="resume",
            namespace=kueue_env.namespace,
            run_duration="1s",
            hold="false",
            fail="2,5,8",
            parallelism=10,
            conn_id=CONN_ID,
            container=blob.container,
        ),
    )

    run = airflow_home.test_dag("resume", run_after="2026-11-30T02:00:00+00:00")

    assert run.succeeded, run.output[-6000:]
    jobs = sorted(
        kueue_env.cluster.batch.list_namespaced_job(kueue_env.namespace).items,
        key=lambda j: j.metadata.creation_timestamp,
    )
    assert [j.spec.completions for j in jobs] == [10, 3], (
        "the retry's Job runs exactly the 3 remaining shards"
    )
    env = {e.name: e for e in jobs[1].spec.template.spec.containers[0].env}
    assert env["AIRFLOW_KUEUE_SHARDS"].value == "2,5,8"
    for job in jobs:  # each Job's pods read their own SAS Secret, which the Job owns
        sas = {e.name: e for e in job.spec.template.spec.containers[0].env}["AIRFLOW_KUEUE_CHECKPOINT_SAS"]
        assert re.fullmatch(
            rf"{job.metadata.name}-checkpoint-[0-9a-f]{{16}}", sas.value_from.secret_key_ref.name
        )
    result = returned_result(run)
    assert result["completed_indexes"] == "0-9" and result["completions"] == 10 and result["failed"] == 0
    assert result["attempts"] == 2
    prefix = ledger_prefix("resume", "manual__2026-11-30T02:00:00+00:00", "shards")
    ledger = read_ledger(blob, prefix)
    # Both tries checkpoint in the one container the ledger's salt names (the retry resumed from it).
    assert ledger.container_salt is not None, "the first try drew the salt with the ledger"
    salted = shard_container_name(blob.container, prefix, ledger.container_salt)
    assert salted != shard_container_name(blob.container, prefix)
    urls = {
        {e.name: e for e in j.spec.template.spec.containers[0].env}["AIRFLOW_KUEUE_CHECKPOINT_URL"].value
        for j in jobs
    }
    assert [u.rsplit("/", 1)[1] for u in urls] == [salted], "both Jobs' pods use the salted container"
    assert [(a.try_number, str(a.shards), str(a.completed), a.status) for a in ledger.attempts] == [
        (1, "0-9", "0,1,3,4,6,7,9", "failed"),
        (2, "2,5,8", "2,5,8", "succeeded"),
    ]
    _assert_no_secret(kueue_env, blob, run.output, result, prefix)
    # The retry says what it runs, and the end speaks in shards (a retry's Job index 0 is shard 2).
    assert (
        "7 of 10 shards done in 1 earlier attempt(s); running the 3 unfinished (2,5,8) as Job indexes 0-2"
        in (run.output)
    )
    assert "(its 3 indexes ran shards 2,5,8); task: 10/10 shards done over 2 attempt(s)" in run.output
    _assert_figures_cover_both_jobs(jobs, result)


def _assert_figures_cover_both_jobs(jobs: list[Any], result: dict[str, Any]) -> None:
    """Queue time, run time and cost over both Jobs, each at its own pod count, as their own status says:
    pods = min(parallelism, completions), queued = created -> startTime, running = startTime -> the
    Complete/Failed condition. The provider measures admission from the Workload, a moment before the Job
    controller sets startTime: within a second or two per Job."""
    expected = []
    for job in jobs:
        ended = next(
            c for c in job.status.conditions if c.type in ("Complete", "Failed") and c.status == "True"
        )
        pods = min(job.spec.parallelism, job.spec.completions)
        queued = (job.status.start_time - job.metadata.creation_timestamp).total_seconds()
        running = (ended.last_transition_time - job.status.start_time).total_seconds()
        expected.append((job.metadata.name, pods, queued, running))
    figures = result["attempt_figures"]
    assert [(f["job_name"], f["pods"]) for f in figures] == [(n, p) for n, p, _, _ in expected], figures
    assert [f["pods"] for f in figures] == [10, 3]
    for figure, (_, _, queued, running) in zip(figures, expected, strict=True):
        assert abs(figure["running_seconds"] - running) <= 2.5, (figure, running)
        assert abs(figure["queued_seconds"] - queued) <= 2.5, (figure, queued)
    assert result["running_seconds"] == round(sum(f["running_seconds"] for f in figures), 3)
    assert abs(result["running_seconds"] - sum(r for *_, r in expected)) <= 5
    # 250m CPU / 256Mi of a 16-CPU VM: a share of 250/16000 at the on-demand price (no spot=), each Job at
    # its own pods (from its spec) and run time (checked against its status above)
    share, rate = 0.25 / 16, 0.904
    cost = sum(f["pods"] * f["running_seconds"] for f in figures) * share * rate / 3600
    assert abs(result["estimated_cost_usd"] - cost) <= 2e-6, (result, cost)
    assert result["cost_basis"].startswith(f"10 pods x {figures[0]['running_seconds']:.1f} s + 3 pods x")


def _assert_no_secret(
    env: KueueEnv, blob: SimpleNamespace, log: str, result: dict[str, Any], prefix: str
) -> None:
    """Acceptance: no account key, SAS or connection-string key in logs, XCom, the ledger or the Job spec."""
    secrets = [AZURITE_KEY, "AccountKey=", "sig="]
    jobs = env.cluster.api.sanitize_for_serialization(env.cluster.batch.list_namespaced_job(env.namespace))
    for secret in env.cluster.core.list_namespaced_secret(env.namespace).items:  # a SAS, never the key
        for value in (secret.data or {}).values():
            assert AZURITE_KEY not in base64.b64decode(value).decode(errors="replace")
    ledger = blob.service.get_blob_client(blob.container, f"{prefix}/ledger.json").download_blob().readall()
    places = {
        "task log": log,
        "result": json.dumps(result),
        "ledger": ledger.decode(),
        "Job specs": json.dumps(jobs),
    }
    for place, text in places.items():
        for secret in secrets:
            assert secret not in text, f"{secret[:12]}… appears in the {place}"


def _context(task_id: str, try_number: int = 1) -> dict[str, Any]:
    return {
        "ti": SimpleNamespace(
            dag_id="ckpt", task_id=task_id, run_id=f"run-{short_id()}", try_number=try_number, map_index=-1
        )
    }


@pytest.mark.parametrize(
    ("checkpointing", "expected"),
    [
        ({"conn_id": "no_such_blob_connection"}, "no_such_blob_connection"),
        ({"conn_id": CONN_ID, "container": "does-not-exist", "create_container": False}, "does-not-exist"),
        ({"conn_id": "kueue_blob_bad_key"}, "check the account key"),
    ],
    ids=["unknown connection", "missing container", "bad credentials"],
)
def test_bad_blob_configuration_fails_before_the_job_is_submitted(
    kueue_env: KueueEnv,
    blob: SimpleNamespace,
    checkpointing: dict[str, Any],
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bad_key = blob.conn_string.replace(AZURITE_KEY, base64.b64encode(b"not the key" * 6).decode())
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUEUE_BLOB_BAD_KEY",
        json.dumps({"conn_type": "wasb", "extra": {"connection_string": bad_key}}),
    )
    op = KueueIndexedJobOperator(
        task_id="ckpt",
        namespace=kueue_env.namespace,
        queue_name="lq",
        image="example.invalid/shard:1",
        completions=2,
        checkpointing=checkpointing,
    )
    started = time.monotonic()
    with pytest.raises(AirflowFailException) as err:
        op.execute(_context("ckpt"))  # type: ignore[arg-type]
    assert expected.lower() in str(err.value).lower(), str(err.value)
    assert time.monotonic() - started < 30, "fails fast"
    assert kueue_env.cluster.batch.list_namespaced_job(kueue_env.namespace).items == []
    assert AZURITE_KEY not in str(err.value)


@pytest.mark.serial  # it stops Azurite, which every checkpointing test shares
def test_blob_outage_mid_run_does_not_fail_the_task_and_the_ledger_catches_up(
    kueue_env: KueueEnv, airflow_home: AirflowHome, blob: SimpleNamespace, devcluster_env: dict[str, str]
) -> None:
    airflow_home.write_dag(
        "outage",
        RETRY_DAG.format(
            dag_id="outage",
            namespace=kueue_env.namespace,
            run_duration="1s",
            hold="true",
            fail="",
            parallelism=5,
            conn_id=CONN_ID,
            container=blob.container,
        ),
    )
    airflow_home.env["AIRFLOW_KUEUE_DEBUG_SIGNAL"] = "1"
    background = airflow_home.start_dag("outage", run_after="2026-11-30T03:00:00+00:00")
    layout = Layout.default()
    try:
        wait_for("5 pods running", lambda: len(kueue_env.running_pods()) == 5, timeout=240)
        (job,) = kueue_env.jobs()
        _stop_azurite(layout)
        kueue_env.release(job.metadata.name)  # the first 5 shards finish while Blob Storage is away ...
        # ... and the ledger writer has given up a write (past the Blob hook's own retries) before it is back
        try:
            wait_for(
                "a failed ledger write in the task log",
                lambda: re.search(r"ledger write for \S+ failed", background.output()),
                timeout=240,  # the hub's periodic LIST (RESYNC_SECONDS) catches a lagging watch cache
            )
        except AssertionError as exc:
            job_now = kueue_env.job(job.metadata.name) or {}
            os.kill(background.proc.pid, signal.SIGUSR2)  # the hub logs its state and every asyncio task
            time.sleep(3)
            raise AssertionError(
                f"{exc}; Job status: {job_now.get('status')}; task log tail:\n{background.output()[-12000:]}"
                f"\nstacks of the airflow process:\n{stacks_of(background.proc.pid)}"
            ) from None
        _restart_azurite()
        kueue_env.release_until_finished(job.metadata.name)  # the second 5 finish after it is back
        run = background.wait(timeout=300)
    finally:
        background.kill()
        _restart_azurite()

    assert run.succeeded, run.output[-6000:]
    assert re.search(r"ledger write for \S+ failed", run.output), "progress was offered during the outage"
    ledger = read_ledger(blob, ledger_prefix("outage", "manual__2026-11-30T03:00:00+00:00", "shards"))
    assert str(ledger.completed) == "0-9" and ledger.attempts[0].status == "succeeded"
    assert len(ledger.attempts) == 1, "the task did not fail: one attempt"


def stacks_of(pid: int) -> str:
    """Every thread's Python stack (py-spy, when installed): what a process that stopped reacting is doing."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        return "(py-spy not installed)"
    dump = subprocess.run([spy, "dump", "--subprocesses", "--pid", str(pid)], capture_output=True, text=True)
    return (dump.stdout + dump.stderr)[-12000:]


def _stop_azurite(layout: Layout) -> None:
    """Stop Azurite for sure: by its pid file, and any Azurite of ours running without one."""
    procs.stop(layout, "azurite")
    azurite = next(c for c in components(Path(), layout) if c.name == "azurite")
    while (pid := procs.find_running(azurite)) is not None:
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
    wait_for("Azurite stopped", lambda: not _port_open(10000), timeout=30)


def _restart_azurite() -> None:
    layout = Layout.default()
    azurite = next(c for c in components(Path(), layout) if c.name == "azurite")
    procs.start(layout, azurite)
    wait_for("Azurite back", lambda: _port_open(10000), timeout=30)


def _port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def test_two_triggers_writing_the_ledger_at_once_lose_no_index(
    kueue_env: KueueEnv, blob: SimpleNamespace
) -> None:
    from airflow_kueue_provider.kueue.checkpoints.shard_packing import ShardPacks
    from airflow_kueue_provider.kueue.index_set import IndexSet
    from airflow_kueue_provider.operators.checkpointing import Checkpointing, CheckpointSession
    from airflow_kueue_provider.triggers.kueue_job import KueueJobTrigger

    identity = AirflowIdentity("ckpt", "twin", f"run-{short_id()}")
    op = KueueIndexedJobOperator(
        task_id="twin",
        namespace=kueue_env.namespace,
        queue_name="lq",
        image="example.invalid/shard:1",
        completions=12,
        parallelism=4,
        annotations={"kwok.airflow-kueue.io/run-duration": "1s"},
    )
    session = CheckpointSession(Checkpointing(CONN_ID, blob.container), identity, 12)
    session.check()
    job = KindClient(JOB, "kubernetes_default").create(op.build_manifest(identity))
    session.record_attempt(job["metadata"]["name"], ShardPacks(IndexSet.range(0, 12)))

    def trigger() -> KueueJobTrigger:
        return KueueJobTrigger(
            job_name=job["metadata"]["name"],
            namespace=kueue_env.namespace,
            queue_name="lq",
            ledger=session.trigger_ledger(),
        )

    async def both() -> list[Any]:
        return await asyncio.gather(trigger().first_event(), trigger().first_event())

    events = asyncio.run(both())
    assert [e["status"] for e in events] == ["success", "success"]
    ledger = session.ledger.read()
    assert ledger is not None and str(ledger.completed) == "0-11"


def test_a_container_made_anew_after_its_ledger_went_has_a_new_name_an_old_sas_does_not_open(
    blob: SimpleNamespace,
) -> None:
    """A SAS that carries its own window (as a user-delegation SAS does: no stored policy to drop) stays
    valid after its container is deleted; a container made anew under the same name would accept it again.
    A new first try after the ledger went (a sweep) draws a new salt, so its container has a new name."""
    from datetime import datetime, timedelta

    from azure.core.exceptions import HttpResponseError
    from azure.storage.blob import ContainerClient

    from airflow_kueue_provider.hooks.blob_containers import BlobAccountHook
    from airflow_kueue_provider.operators.checkpointing import Checkpointing, CheckpointSession
    from airflow_kueue_provider.storage.blob_auth import container_url_of

    config = Checkpointing(CONN_ID, blob.container)
    identity = AirflowIdentity("ckpt", "anew", f"run-{short_id()}")
    first = CheckpointSession(config, identity, 4)
    first.check()
    first.remaining([])  # the first try: the ledger (and its salt) ...
    first.prepare_pod_access()  # ... then the container
    old_name = first.shard_container
    now = datetime.now(UTC)
    with BlobAccountHook(CONN_ID, blob.container) as hook:
        unbound = hook.container_sas(old_name, now - timedelta(minutes=5), now + timedelta(hours=1))
        url = container_url_of(hook.get_auth(), old_name)
    checkpoint = f"{first.prefix}/shards/0/checkpoint-00000001.json"
    with ContainerClient.from_container_url(f"{url}?{unbound}") as pods:
        pods.upload_blob(checkpoint, b"{}")  # the SAS works on its container

    # The sweep deletes the ledger and the emptied container; a new first try of the task instance.
    blob.service.get_blob_client(blob.container, first.ledger.name).delete_blob()
    blob.service.delete_container(old_name)
    again = CheckpointSession(config, identity, 4)
    again.remaining([])
    again.prepare_pod_access()
    new_url = url.rsplit("/", 1)[0] + "/" + again.shard_container
    for target in (new_url, url):  # the new name is not what the SAS signs; the old one is gone
        with (
            ContainerClient.from_container_url(f"{target}?{unbound}") as pods,
            pytest.raises(HttpResponseError) as refused,
        ):
            pods.upload_blob(checkpoint, b"{}", overwrite=True)
        assert refused.value.status_code in (403, 404), refused.value
    assert blob.service.get_container_client(again.shard_container).exists()
    assert again.container_salt not in (None, first.container_salt)
    assert again.shard_container != old_name, "the re-created container has a new name"
    assert read_ledger(blob, again.prefix).container_salt == again.container_salt
    assert not blob.service.get_container_client(old_name).exists(), "nothing re-created the old name"
