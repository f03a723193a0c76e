"""Kueue's webhooks deleted in the middle of a parallelism ramp (issue 38, item 6): never a pod outside quota.

A ramped Job is elastic: Kueue admits each raise of ``spec.parallelism`` as a new Workload slice, and the pods
a raise adds wait behind the ``kueue.x-k8s.io/elastic-job`` scheduling gate until their slice is admitted
(Kueue's ElasticJobUngater lifts the gate up to the admitted slice's count). Kueue's mutating webhook puts
that gate into the pod template when the Job is created; its validating webhook checks each update.

The test takes both webhook configurations away after the first raise (``first_raise``), or before the task
submits its Job (``submit``: an outage that began earlier, or a retry during one: the webhook never saw the
Job, so only the provider's own gate holds the raised pods), keeps sampling "pods started" against "pods the
admitted slice grants" while the ramp raises parallelism past the ClusterQueue's quota, then puts the
webhooks back exactly as they were and lets the task finish.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from airflow_kueue_provider.kueue.spec.parallelism_ramp import ParallelismRamp
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

from ..cluster import HOLD, Cluster, KueueEnv, is_true, wait_for

MUTATING = "kueue-mutating-webhook-configuration"
VALIDATING = "kueue-validating-webhook-configuration"
ELASTIC_GATE = "kueue.x-k8s.io/elastic-job"
QUOTA_PODS = 6
"""The ClusterQueue holds 6 one-CPU pods: the ramp's slices of 2, 4 and 6 are admitted, the raise to 8 not."""
HOLD_AT_TARGET = 8.0
"""Seconds the ramp stays at its target (past the quota) with the webhooks gone before they come back."""
PROBE_NAMESPACE = "default"  # Kueue manages it; the probe is a dry run, nothing is created
SERVER_SET = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields")


@dataclass
class KueueWebhooks:
    """Kueue's two webhook configurations, as they were when the test began; ``delete`` takes them away and
    the fixture always puts them back, then waits until Kueue's webhook answers again."""

    cluster: Cluster
    namespace: str
    saved: dict[str, dict[str, Any]] = field(default_factory=dict)
    deleted_at: float | None = None

    @property
    def api(self) -> client.AdmissionregistrationV1Api:
        return client.AdmissionregistrationV1Api(self.cluster.api)

    def read(self) -> dict[str, dict[str, Any] | None]:
        found: dict[str, dict[str, Any] | None] = {}
        for name, read in (
            (MUTATING, self.api.read_mutating_webhook_configuration),
            (VALIDATING, self.api.read_validating_webhook_configuration),
        ):
            try:
                found[name] = self.cluster.api.sanitize_for_serialization(read(name))
            except ApiException as exc:
                if exc.status != 404:
                    raise
                found[name] = None
        return found

    def save(self) -> None:
        for name, conf in self.read().items():
            assert conf is not None, f"{name} is missing before the test: run `python -m devcluster up`"
            self.saved[name] = conf

    def present(self) -> bool:
        return all(conf is not None for conf in self.read().values())

    def delete(self) -> None:
        self.api.delete_mutating_webhook_configuration(MUTATING)
        self.api.delete_validating_webhook_configuration(VALIDATING)
        self.deleted_at = time.monotonic()

    def restore(self) -> None:
        """Each configuration as saved: created again, or replaced where something (a concurrent
        ``devcluster up``) already made it again."""
        current = self.read()
        for name, conf in self.saved.items():
            body = {**conf, "metadata": {k: v for k, v in conf["metadata"].items() if k not in SERVER_SET}}
            mutating = name == MUTATING
            now = current[name]
            if now is None:
                create = (
                    self.api.create_mutating_webhook_configuration
                    if mutating
                    else self.api.create_validating_webhook_configuration
                )
                create(body)
            elif now["webhooks"] != conf["webhooks"]:
                body["metadata"]["resourceVersion"] = now["metadata"]["resourceVersion"]
                replace = (
                    self.api.replace_mutating_webhook_configuration
                    if mutating
                    else self.api.replace_validating_webhook_configuration
                )
                replace(name, body)

    def restored_as_saved(self) -> bool:
        return all(
            conf is not None and conf["webhooks"] == self.saved[name]["webhooks"]
            for name, conf in self.read().items()
        )

    def answering(self) -> bool:
        """Kueue's job webhooks answer again: a dry-run queued Job comes back suspended (mutating), and one
        with a malformed min-parallelism annotation is refused (validating)."""
        probe: dict[str, Any] = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "webhook-probe", "labels": {"kueue.x-k8s.io/queue-name": "probe"}},
            "spec": {
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
                }
            },
        }
        batch = self.cluster.batch
        made = batch.create_namespaced_job(self.namespace, probe, dry_run="All")
        if not made.spec.suspend:
            return False
        probe["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "not-a-number"}
        try:
            batch.create_namespaced_job(self.namespace, probe, dry_run="All")
        except ApiException as exc:
            return exc.status in (400, 403, 422) and "job-min-parallelism" in str(exc.body)
        return False


@pytest.fixture
def kueue_webhooks(cluster: Cluster) -> Iterator[KueueWebhooks]:
    hooks = KueueWebhooks(cluster, PROBE_NAMESPACE)
    hooks.save()
    try:
        yield hooks
    finally:
        wait_for("Kueue's webhook configurations restored", _restored(hooks), timeout=60, interval=1)
        wait_for("Kueue's webhook answering again", hooks.answering, timeout=60, interval=0.5)


def _restored(hooks: KueueWebhooks) -> Any:
    def attempt() -> bool:
        try:
            hooks.restore()
        except ApiException as exc:  # a conflict with a concurrent apply: try again
            if exc.status not in (409, 422):
                raise
        return hooks.restored_as_saved()

    return attempt


@dataclass(frozen=True)
class Sample:
    at: float
    parallelism: int
    started: int
    """Pods of the Job bound to a node and not finished (what uses quota)."""
    running: int
    gated: int
    admitted: int
    """The pods the admitted, unfinished Workload slice grants (the largest, if two overlap)."""
    webhooks: bool


def _admitted_count(workloads: list[dict[str, Any]]) -> int:
    counts = [0]
    for wl in workloads:
        if is_true(wl, "Admitted") and not is_true(wl, "Finished"):
            assignments = (wl.get("status", {}).get("admission") or {}).get("podSetAssignments") or []
            counts.append(sum(int(a.get("count") or 0) for a in assignments))
    return max(counts)


def _sample(env: KueueEnv, job: dict[str, Any], webhooks: bool, t0: float) -> Sample | None:
    """Pods first, then the Workloads: a pod ungated by the time it is listed had its slice admitted before,
    so the later list of Workloads includes that slice (no false alarm from the order of the two reads)."""
    pods = env.pods(job["metadata"]["name"])
    workloads = env.cluster.custom.list_namespaced_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        env.namespace,
        "workloads",
        label_selector=f"kueue.x-k8s.io/job-uid={job['metadata']['uid']}",
    )["items"]
    now = env.job(job["metadata"]["name"])
    if now is None or is_true(now, "Complete") or is_true(now, "Failed"):
        return None  # the Job finished between the reads: its Workload is Finished, its pods are not yet
    live = [p for p in pods if p["status"].get("phase") in ("Pending", "Running")]
    return Sample(
        at=time.monotonic() - t0,
        parallelism=int(now["spec"].get("parallelism") or 0),
        started=sum(1 for p in live if p["spec"].get("nodeName")),
        running=sum(1 for p in live if p["status"].get("phase") == "Running"),
        gated=sum(1 for p in live if p["spec"].get("schedulingGates")),
        admitted=_admitted_count(workloads),
        webhooks=webhooks,
    )


def _changes(samples: list[Sample]) -> str:
    """The samples where something but the time changed: the figures the report quotes."""
    lines, last = [], None
    for s in samples:
        key = (s.webhooks, s.parallelism, s.admitted, s.started, s.running, s.gated)
        if key != last:
            lines.append(
                f"t={s.at:5.1f}s webhooks={'yes' if s.webhooks else 'no '} parallelism={s.parallelism} "
                f"admitted={s.admitted} started={s.started} running={s.running} gated={s.gated}"
            )
            last = key
    return "\n".join(lines)


@pytest.mark.serial  # it takes Kueue's webhook configurations away from every other test
@pytest.mark.parametrize("gone_from", ["first_raise", "submit"])
def test_webhooks_deleted_mid_ramp_never_start_a_pod_beyond_the_admitted_slice(
    kueue_env_factory: Callable[..., KueueEnv], kueue_webhooks: KueueWebhooks, gone_from: str
) -> None:
    env = kueue_env_factory(cpu=str(QUOTA_PODS))  # 1 CPU a pod: the raise to 8 is never admitted
    op = KueueIndexedJobOperator(
        task_id="ramped",
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/shard:1",
        completions=16,
        parallelism=8,
        deferrable=False,
        resources={"requests": {"cpu": "1", "memory": "1Gi"}},
        annotations={"kwok.airflow-kueue.io/run-duration": "1s", **HOLD},  # pods run until released
        parallelism_ramp=ParallelismRamp(start=2, step=2, every_seconds=3),
    )
    ti = SimpleNamespace(dag_id="ramp_nowebhook", task_id="ramped", run_id="r1", try_number=1, map_index=-1)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = op.execute({"ti": ti})  # type: ignore[typeddict-item]
        except Exception as exc:  # surfaced by the assertions below
            outcome["error"] = exc

    webhooks = deleted = gone_from != "submit"
    if not webhooks:
        kueue_webhooks.delete()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    job = env.cluster.api.sanitize_for_serialization(wait_for("the Job", lambda: env.jobs(), timeout=60)[0])
    gates = [g["name"] for g in job["spec"]["template"]["spec"].get("schedulingGates") or []]
    t0 = time.monotonic()
    samples: list[Sample] = []
    deleted, restored = not webhooks, False
    last_raise: float | None = None
    while worker.is_alive() and time.monotonic() - t0 < 240:
        sample = _sample(env, job, webhooks, t0)
        if sample is not None:
            samples.append(sample)
            if not deleted and sample.parallelism >= 4:  # the first raise happened: take the webhooks away
                kueue_webhooks.delete()
                webhooks, deleted = False, True
            if last_raise is None and sample.parallelism >= 8:
                last_raise = sample.at
            held = last_raise is not None and sample.at - last_raise > HOLD_AT_TARGET
            if deleted and not restored and held:
                # the raise past the quota stayed unadmitted a while: put the webhooks back, release the pods
                wait_for("webhooks restored", _restored(kueue_webhooks), timeout=60, interval=1)
                wait_for("Kueue's webhook answering", kueue_webhooks.answering, timeout=60, interval=0.5)
                webhooks, restored = True, True
        if restored:
            env.release(job["metadata"]["name"])
        time.sleep(0.2)
    worker.join(timeout=60)

    over = [s for s in samples if s.started > s.admitted]
    without = [s for s in samples if not s.webhooks]
    print(f"template schedulingGates: {gates}\n{_changes(samples)}")
    assert without, "samples were taken while the webhooks were gone"
    assert max(s.parallelism for s in without) > min(s.parallelism for s in without), (
        "the ramp raised parallelism while the webhooks were gone"
    )
    assert not over, f"pods started beyond the admitted slice: {over[:5]}"
    assert ELASTIC_GATE in gates, "the ramped Job's pods wait behind Kueue's elastic-job gate"
    assert max(s.admitted for s in samples) == QUOTA_PODS, "Kueue admitted the slices that fit, never more"
    assert max(s.started for s in samples) == QUOTA_PODS, "the admitted slices' pods all started"
    past_quota = [s for s in without if s.parallelism == 8]
    assert past_quota and max(s.gated for s in past_quota) == 8 - QUOTA_PODS, (
        "the raise past the quota was made while the webhooks were gone, and its pods waited gated"
    )
    assert not worker.is_alive(), "the task finished"
    assert "error" not in outcome, outcome.get("error")
    assert outcome["result"]["completed_indexes"] == "0-15"


def test_pods_the_elastic_gate_holds_after_admission_fail_the_task_naming_the_feature_gate(
    kueue_env: KueueEnv,
) -> None:
    """The provider puts Kueue's elastic-job gate into a ramped Job's template itself, so where Kueue never
    lifts it (its ElasticJobsViaWorkloadSlices feature gate off) the admitted Job's pods would wait forever.
    The same pods, made here by a Job that carries the gate but is not elastic (Kueue's ungater leaves it),
    end the task after ``start_timeout`` with the cause and the fix, and the Job is deleted."""
    env = kueue_env
    gate = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "spec": {"template": {"spec": {"schedulingGates": [{"name": ELASTIC_GATE}]}}},
    }
    op = KueueIndexedJobOperator(
        task_id="gated",
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/shard:1",
        completions=2,
        deferrable=False,
        start_timeout=10,
        resources={"requests": {"cpu": "1", "memory": "1Gi"}},
        job_template=gate,
    )
    ti = SimpleNamespace(dag_id="gate_never_lifted", task_id="gated", run_id="r1", try_number=1, map_index=-1)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = op.execute({"ti": ti})  # type: ignore[typeddict-item]
        except Exception as exc:  # surfaced by the assertions below
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=120)  # start_timeout 10 s, then the first look at the pods

    assert not worker.is_alive(), "the task ended instead of waiting for a gate nothing lifts"
    message = str(outcome.get("error"))
    assert f"wait behind Kueue's {ELASTIC_GATE} scheduling gate" in message, message
    assert "ElasticJobsViaWorkloadSlices feature gate" in message and "drop parallelism_ramp" in message
    assert "deleted to release its quota (start_timeout=10s)" in message
    wait_for("the Job deleted", lambda: not env.jobs(), timeout=30)
