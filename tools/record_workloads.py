"""Record real Kueue Workload objects as fixtures for the unit tests of ``kueue/progress/workload_state.py``.

A developer tool, run by hand against the local cluster (nothing runs it in CI)::

    .venv/bin/python -m devcluster up          # idempotent; the cluster this script talks to
    .venv/bin/python tools/record_workloads.py  # all states
    .venv/bin/python tools/record_workloads.py --only preempted,failed

It creates a fresh namespace with its own ResourceFlavor, ClusterQueue and LocalQueue (unique names, through
the helpers of ``tests/integration/cluster.py``), drives batch/v1 Indexed Jobs into each Workload state and
writes one file per state to ``tests/unit/kueue/fixtures/workloads/<state>.json``::

    {"expected_phase": "<WorkloadPhase value>", "workload": {<the kueue.x-k8s.io/v1beta2 Workload>}}

``expected_phase`` is what Kueue's semantics say the Workload is in (decided here from how the state was
produced, not by running the mapping), so ``tests/unit/kueue/progress/test_workload_state.py`` checks
the mapping against it. ``metadata.managedFields`` is dropped; keys are sorted and indented by one space so a
re-recording diffs cleanly (names, uids and timestamps do change between recordings).

States (file stem -> how it is produced -> expected phase):

- ``queued``: a Job waits behind another that holds all the quota (``QuotaReserved=False``, reason
  ``Pending``) -> ``Queued``.
- ``queued-inadmissible``: a Job labelled for a LocalQueue that does not exist (``Inadmissible``:
  "LocalQueue ... doesn't exist") -> ``Queued``.
- ``quota-reserved``: a ClusterQueue with an AdmissionCheck whose controller never answers (the script marks
  the check Active itself), so quota is reserved but the Workload is never admitted -> ``QuotaReserved``.
- ``admitted``: admitted, pods held Pending by ``kwok.airflow-kueue.io/start-delay`` (``PodsReady=False``)
  -> ``Admitted``.
- ``running``: admitted and all pods running (``PodsReady=True``) -> ``Running``.
- ``preempted``: a low-priority Job evicted by a high-priority one (ClusterQueue ``preemption:
  withinClusterQueue: LowerPriority``, two WorkloadPriorityClasses) -> ``Preempted``.
- ``preempted-requeued``: the same Workload later, requeued and waiting behind the high-priority Job
  -> ``Preempted`` while ``Evicted`` is still true, else ``Queued``.
- ``evicted``: a running Workload deactivated (``spec.active=false``; ``Evicted`` reason ``Deactivated``)
  -> ``Evicted``.
- ``succeeded``: every index succeeds (``Finished`` reason ``Succeeded``) -> ``Succeeded``.
- ``failed``: index 0 fails (``kwok.airflow-kueue.io/fail-indexes: "0"``) with ``backoffLimit: 0``
  (``Finished`` reason ``Failed``) -> ``Failed``.

Fake pods are steered by pod-template annotations (docs/bed.md, "Fake pods"). Every object the script creates
(namespace with its Jobs and Workloads, ResourceFlavor, ClusterQueues, AdmissionCheck,
WorkloadPriorityClasses) is deleted at the end, also on failure, and the script waits until they are gone.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kubernetes import config  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from tests.integration.cluster import (  # noqa: E402
    KUEUE_GROUP,
    KUEUE_VERSION,
    Cluster,
    KueueEnv,
    condition,
    create_kueue_env,
    delete_kueue_env,
    indexed_job,
    is_true,
    short_id,
    wait_for,
)

DEFAULT_OUT = REPO / "tests" / "unit" / "kueue" / "fixtures" / "workloads"
DEFAULT_KUBECONFIG = REPO / ".devcluster" / "kubeconfig"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
START_DELAY = "kwok.airflow-kueue.io/start-delay"
FAIL_INDEXES = "kwok.airflow-kueue.io/fail-indexes"
WorkloadDict = dict[str, Any]


class Recorder:
    """One namespace/ClusterQueue set, the extra cluster objects made on the way, and the output folder."""

    def __init__(self, cluster: Cluster, env: KueueEnv, out: Path) -> None:
        self.cluster = cluster
        self.env = env
        self.out = out
        self.extra_cluster_queues: list[str] = []
        self.admission_checks: list[str] = []
        self.written: list[Path] = []

    # -- jobs and workloads --------------------------------------------------------------------------

    def submit(self, name: str, queue: str | None = None, **kwargs: Any) -> dict[str, Any]:
        return self.env.create_job(indexed_job(name, queue or self.env.local_queue, **kwargs))

    def workload(self, job: dict[str, Any]) -> WorkloadDict | None:
        return self.env.workload(job)

    def wait_workload(
        self, what: str, job: dict[str, Any], test: Callable[[WorkloadDict], bool], timeout: float = 60
    ) -> WorkloadDict:
        """The first Workload of ``job`` that passes ``test`` (so the snapshot is the object that passed)."""

        def probe() -> WorkloadDict | None:
            workload = self.workload(job)
            return workload if workload is not None and test(workload) else None

        return wait_for(f"{job['metadata']['name']}: {what}", probe, timeout=timeout)

    def delete_jobs(self, *jobs: dict[str, Any]) -> None:
        """Delete Jobs and wait until their Workloads are gone, so the next state starts with free quota."""
        for job in jobs:
            try:
                self.cluster.batch.delete_namespaced_job(
                    job["metadata"]["name"], self.env.namespace, propagation_policy="Background"
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
        names = ", ".join(job["metadata"]["name"] for job in jobs)
        wait_for(
            f"Workloads of {names} deleted",
            lambda: all(self.workload(job) is None for job in jobs),
            timeout=60,
        )

    def save(self, state: str, workload: WorkloadDict, expected_phase: str) -> None:
        body = copy.deepcopy(workload)
        body.get("metadata", {}).pop("managedFields", None)
        path = self.out / f"{state}.json"
        text = json.dumps({"workload": body, "expected_phase": expected_phase}, sort_keys=True, indent=1)
        path.write_text(text + "\n")
        self.written.append(path)
        conditions = {c["type"]: f"{c['status']}/{c.get('reason', '')}" for c in _conditions(workload)}
        print(f"  {state}: expected {expected_phase}; conditions {conditions}", flush=True)

    # -- extra cluster objects -----------------------------------------------------------------------

    def cluster_queue_with_never_ready_check(self) -> str:
        """A LocalQueue on a new ClusterQueue that needs an AdmissionCheck nobody ever answers."""
        sid = short_id()
        check, cq, lq = f"ac-never-{sid}", f"cq-checks-{sid}", "lq-checks"
        self.cluster.kueue_create(
            "admissionchecks",
            {
                "kind": "AdmissionCheck",
                "metadata": {"name": check},
                "spec": {"controllerName": "airflow-kueue.io/record-workloads-never-ready"},
            },
        )
        self.admission_checks.append(check)
        # No controller owns this check, so mark it Active by hand (a real check controller does that);
        # the ClusterQueue stays inactive while any of its checks is not Active.
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.cluster.custom.patch_cluster_custom_object_status(
            KUEUE_GROUP,
            KUEUE_VERSION,
            "admissionchecks",
            check,
            {
                "status": {
                    "conditions": [
                        {
                            "type": "Active",
                            "status": "True",
                            "reason": "Active",
                            "message": "marked active by tools/record_workloads.py",
                            "lastTransitionTime": now,
                        }
                    ]
                }
            },
        )
        main_cq = self.cluster.kueue_get("clusterqueues", self.env.cluster_queue)
        spec = {
            "namespaceSelector": main_cq["spec"]["namespaceSelector"],
            "resourceGroups": main_cq["spec"]["resourceGroups"],
            "admissionChecksStrategy": {"admissionChecks": [{"name": check}]},
        }
        self.cluster.kueue_create(
            "clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": cq}, "spec": spec}
        )
        self.extra_cluster_queues.append(cq)
        self.cluster.kueue_create(
            "localqueues",
            {
                "kind": "LocalQueue",
                "metadata": {"name": lq, "namespace": self.env.namespace},
                "spec": {"clusterQueue": cq},
            },
            namespace=self.env.namespace,
        )
        wait_for(
            f"LocalQueue {lq} active",
            lambda: is_true(self.cluster.kueue_get("localqueues", lq, self.env.namespace), "Active"),
            timeout=30,
        )
        return lq

    def cleanup(self) -> None:
        """Delete everything this run created and wait until it is gone."""
        c = self.cluster
        delete_kueue_env(self.env)
        for cq in self.extra_cluster_queues:
            c.kueue_delete("clusterqueues", cq)
        for check in self.admission_checks:
            c.kueue_delete("admissionchecks", check)
        leftovers: list[tuple[str, str]] = [
            ("clusterqueues", self.env.cluster_queue),
            ("resourceflavors", self.env.flavor),
            *(("clusterqueues", cq) for cq in self.extra_cluster_queues),
            *(("admissionchecks", check) for check in self.admission_checks),
            *(("workloadpriorityclasses", pc) for pc in self.env.priority_classes),
        ]

        def gone() -> bool:
            if _exists(lambda: c.core.read_namespace(self.env.namespace)):
                return False
            return not any(_exists(functools.partial(c.kueue_get, p, n)) for p, n in leftovers)

        wait_for(f"namespace {self.env.namespace} and its queues deleted", gone, timeout=120, interval=1)
        print(f"cleaned up namespace {self.env.namespace} and {len(leftovers)} cluster-scoped objects")


def _exists(read: Callable[[], Any]) -> bool:
    try:
        read()
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _conditions(workload: WorkloadDict) -> list[dict[str, Any]]:
    return list(workload.get("status", {}).get("conditions") or [])


def _reason(workload: WorkloadDict, ctype: str) -> str | None:
    cond = condition(workload, ctype)
    return cond.get("reason") if cond else None


# -- the states ------------------------------------------------------------------------------------------
# The ClusterQueue has 4 cpu / 16Gi; a state that fills it deletes its Jobs before the next one starts.


def record_queued(r: Recorder) -> None:
    holder = r.submit("quota-holder", completions=2, cpu="2", run_duration="120s")
    r.wait_workload("Admitted", holder, lambda w: is_true(w, "Admitted"))
    waiting = r.submit("waits-for-quota", completions=2, cpu="1", run_duration="1s")
    workload = r.wait_workload(
        "QuotaReserved=False reason Pending",
        waiting,
        lambda w: (
            (condition(w, "QuotaReserved") or {}).get("status") == "False"
            and _reason(w, "QuotaReserved") == "Pending"
        ),
    )
    r.save("queued", workload, "Queued")
    r.delete_jobs(holder, waiting)


def record_queued_inadmissible(r: Recorder) -> None:
    job = r.submit("no-such-queue", queue="no-such-queue", completions=1)
    workload = r.wait_workload(
        "QuotaReserved=False reason Inadmissible",
        job,
        lambda w: (
            (condition(w, "QuotaReserved") or {}).get("status") == "False"
            and "doesn't exist" in (condition(w, "QuotaReserved") or {}).get("message", "")
        ),
    )
    r.save("queued-inadmissible", workload, "Queued")
    r.delete_jobs(job)


def record_quota_reserved(r: Recorder) -> None:
    queue = r.cluster_queue_with_never_ready_check()
    job = r.submit("waits-for-checks", queue=queue, completions=2, cpu="1")
    workload = r.wait_workload(
        "QuotaReserved=True, admission check pending",
        job,
        lambda w: is_true(w, "QuotaReserved") and bool(w.get("status", {}).get("admissionChecks")),
    )
    if is_true(workload, "Admitted"):
        raise AssertionError(f"the Workload was admitted without its admission check: {workload['status']}")
    r.save("quota-reserved", workload, "QuotaReserved")
    r.delete_jobs(job)


def record_admitted_and_running(r: Recorder) -> None:
    job = r.submit(
        "admitted-then-running",
        completions=2,
        cpu="1",
        run_duration="120s",
        annotations={START_DELAY: "15s"},
    )
    admitted = r.wait_workload(
        "Admitted, PodsReady not true", job, lambda w: is_true(w, "Admitted") and not is_true(w, "PodsReady")
    )
    r.save("admitted", admitted, "Admitted")
    running = r.wait_workload("PodsReady=True", job, lambda w: is_true(w, "PodsReady"), timeout=60)
    r.save("running", running, "Running")
    r.delete_jobs(job)


def record_preempted(r: Recorder) -> None:
    low_pc, high_pc = r.env.priority_class("low", 100), r.env.priority_class("high", 1000)
    low = r.submit(
        "low-priority", completions=2, cpu="2", run_duration="300s", labels={PRIORITY_CLASS_LABEL: low_pc}
    )
    r.wait_workload("PodsReady=True", low, lambda w: is_true(w, "PodsReady"))
    high = r.submit(
        "high-priority", completions=2, cpu="2", run_duration="300s", labels={PRIORITY_CLASS_LABEL: high_pc}
    )
    preempted = r.wait_workload(
        "Evicted=True reason Preempted, Preempted=True",
        low,
        lambda w: is_true(w, "Evicted") and _reason(w, "Evicted") == "Preempted" and is_true(w, "Preempted"),
    )
    r.save("preempted", preempted, "Preempted")
    r.wait_workload("high Admitted", high, lambda w: is_true(w, "Admitted"))
    requeued = r.wait_workload(
        "requeued, waiting for quota",
        low,
        lambda w: (
            is_true(w, "Requeued")
            and (condition(w, "QuotaReserved") or {}).get("status") == "False"
            and not (r.env.job("low-priority") or {}).get("status", {}).get("active")
        ),
    )
    r.save("preempted-requeued", requeued, "Preempted" if is_true(requeued, "Evicted") else "Queued")
    r.delete_jobs(low, high)


def record_evicted(r: Recorder) -> None:
    job = r.submit("deactivated", completions=2, cpu="1", run_duration="300s")
    workload = r.wait_workload("PodsReady=True", job, lambda w: is_true(w, "PodsReady"))
    r.cluster.custom.patch_namespaced_custom_object(
        KUEUE_GROUP,
        KUEUE_VERSION,
        r.env.namespace,
        "workloads",
        workload["metadata"]["name"],
        {"spec": {"active": False}},
    )
    evicted = r.wait_workload(
        "Evicted=True reason Deactivated",
        job,
        lambda w: is_true(w, "Evicted") and _reason(w, "Evicted") == "Deactivated",
    )
    r.save("evicted", evicted, "Evicted")
    r.delete_jobs(job)


def record_succeeded(r: Recorder) -> None:
    job = r.submit("all-indexes-succeed", completions=3, cpu="1", run_duration="1s")
    workload = r.wait_workload("Finished=True", job, lambda w: is_true(w, "Finished"), timeout=90)
    if _reason(workload, "Finished") != "Succeeded":
        raise AssertionError(f"expected Finished reason Succeeded: {condition(workload, 'Finished')}")
    r.save("succeeded", workload, "Succeeded")
    r.delete_jobs(job)


def record_failed(r: Recorder) -> None:
    job = r.submit(
        "index-zero-fails",
        completions=2,
        cpu="1",
        run_duration="1s",
        annotations={FAIL_INDEXES: "0"},
        backoffLimit=0,
    )
    workload = r.wait_workload("Finished=True", job, lambda w: is_true(w, "Finished"), timeout=90)
    if _reason(workload, "Finished") == "Succeeded":
        raise AssertionError(f"expected a failed Finished condition: {condition(workload, 'Finished')}")
    r.save("failed", workload, "Failed")
    r.delete_jobs(job)


STATES: dict[str, Callable[[Recorder], None]] = {
    "queued": record_queued,
    "queued-inadmissible": record_queued_inadmissible,
    "quota-reserved": record_quota_reserved,
    "admitted": record_admitted_and_running,  # also writes running.json
    "preempted": record_preempted,  # also writes preempted-requeued.json
    "evicted": record_evicted,
    "succeeded": record_succeeded,
    "failed": record_failed,
}


@contextmanager
def recorder(kubeconfig: Path, out: Path) -> Iterator[Recorder]:
    cluster = Cluster(config.new_client_from_config(config_file=str(kubeconfig)))
    env = create_kueue_env(
        cluster,
        "record-workloads",
        cpu="4",
        memory="16Gi",
        preemption={"withinClusterQueue": "LowerPriority"},
    )
    print(f"namespace {env.namespace}, ClusterQueue {env.cluster_queue}, ResourceFlavor {env.flavor}")
    rec = Recorder(cluster, env, out)
    try:
        yield rec
    finally:
        rec.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", type=Path, default=DEFAULT_KUBECONFIG, help="admin kubeconfig")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for <state>.json")
    parser.add_argument(
        "--only", default="", help=f"comma-separated subset of: {', '.join(STATES)} (default: all)"
    )
    args = parser.parse_args(argv)
    selected = [s.strip() for s in args.only.split(",") if s.strip()] or list(STATES)
    unknown = [s for s in selected if s not in STATES]
    if unknown:
        parser.error(f"unknown states {unknown}; choose from {list(STATES)}")
    if not args.kubeconfig.is_file():
        parser.error(f"{args.kubeconfig} not found: start the local cluster with `python -m devcluster up`")
    args.out.mkdir(parents=True, exist_ok=True)

    started = time.monotonic()
    with recorder(args.kubeconfig, args.out) as rec:
        for state in selected:
            print(f"recording {state} ...", flush=True)
            STATES[state](rec)
    print(f"wrote {len(rec.written)} files to {args.out} in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
