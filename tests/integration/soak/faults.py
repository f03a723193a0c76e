"""A seeded fault schedule and the injector that plays it.

``schedule(seed, targets, ...)`` is a pure generator: ``random.Random(seed)`` draws, for fault ``n``, the
quiet gap before it (exponential, mean ``mean_gap``), its kind, its target and how long the target stays
down. The same seed and the same fault kinds give the same faults in the same order, so a failing soak is
replayed with its seed (the injector prints the seed and the replay command at the start, the test again on
failure).
How many of them fit in the soak's duration depends on how long each takes to heal on the machine.

``FaultInjector`` plays a schedule in a thread: for each fault it waits the gap, ``kill``s the target, waits
the down time, ``heal``s it, and appends one JSON line to its log (seed, position, kind, target, times,
error). The actions are small objects with ``kill(target)`` and ``heal(target)``:

- ``ClusterComponent``: SIGKILL one devcluster process group (kube-apiserver, etcd, kueue,
  kube-controller-manager (the Job controller), kube-scheduler, kwok, procnode-N; Azurite gets a SIGTERM
  first, see the class); healed by starting that component alone (``devcluster.cluster.start_one``).
- ``AirflowComponent``: SIGKILL a triggerer or the Airflow scheduler of the test's deployment (with its task
  processes), then start it again.
- ``SpotNodeLoss``: what AKS does to a Spot VM: the Node is tainted and cordoned, its pods are evicted
  through the Eviction API (their grace period, DisruptionTarget condition), then the Node is deleted; healed
  by the node coming back (a KWOK node re-created from its saved manifest; a process node re-registers
  itself, or its procnode process is restarted).
"""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

REPO = Path(__file__).resolve().parents[3]
CLUSTER_COMPONENTS = (
    "kube-apiserver",
    "etcd",
    "kueue",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "azurite",
)
EVICTION_TAINT = {"key": "kubernetes.azure.com/scalesetpriority-eviction", "effect": "NoSchedule"}


@dataclass(frozen=True)
class Fault:
    seq: int
    kind: str
    target: str
    gap: float  # quiet seconds before it
    down: float  # seconds between kill and heal


def schedule(
    seed: int, targets: Mapping[str, Sequence[str]], mean_gap: float = 10.0, max_down: float = 6.0
) -> Iterator[Fault]:
    """The endless fault sequence of ``seed`` over ``targets`` (kind -> its targets); kinds without a
    target are left out. Kinds and targets are drawn from sorted lists, so the order of the mapping does
    not matter."""
    if mean_gap <= 0 or max_down <= 0:
        raise ValueError(f"mean_gap={mean_gap} and max_down={max_down} must be > 0 seconds")
    kinds = sorted(k for k, v in targets.items() if v)
    if not kinds:
        raise ValueError("targets: give at least one fault kind with a target")
    rng = random.Random(seed)
    seq = 0
    while True:
        gap = rng.expovariate(1.0 / mean_gap)
        kind = rng.choice(kinds)
        target = rng.choice(sorted(targets[kind]))
        down = rng.uniform(0.5, max_down)
        yield Fault(seq, kind, target, round(gap, 3), round(down, 3))
        seq += 1


class Action(Protocol):
    def kill(self, target: str) -> None: ...

    def heal(self, target: str) -> None: ...


def devcluster_up(log: Path, timeout: float = 600) -> None:
    """``python -m devcluster up`` (idempotent: starts only what is missing), output appended to ``log``;
    retried once (a component killed a moment before may still hold its port)."""
    for attempt in range(2):
        with open(log, "ab") as out:
            done = subprocess.run(
                [sys.executable, "-m", "devcluster", "up"],
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=False,
            )
        if done.returncode == 0:
            return
        if attempt == 0:
            time.sleep(5)
    raise RuntimeError(f"devcluster up exited {done.returncode}; see {log}")


START_ONE = (
    "import sys; from devcluster.cluster import start_one; from devcluster.layout import Layout; "
    "start_one(Layout.default(), sys.argv[1])"
)


class ClusterComponent:
    """A devcluster process: SIGKILL of its process group, then started again alone, as a supervisor would
    (``devcluster.cluster.start_one``, in a short-lived process so the component is not the test's child);
    ``devcluster up`` if that fails.

    ``grace`` (seconds) per target: a SIGTERM first. Azurite gets one: it keeps its blob index in LokiJS,
    saved every 5 s (``autosaveInterval: 5000``), so a SIGKILL loses the blobs written in the last seconds,
    acknowledged writes a real storage account never loses (the long soak of 2026-12-03 13:35 lost six done
    markers that way). Its outage, as Azure's, is then an unavailability, not a loss."""

    GRACE: ClassVar[dict[str, float]] = {"azurite": 3.0}  # it saves at once; its process lingers

    def __init__(self, log: Path) -> None:
        self.log = log

    def kill(self, target: str) -> None:
        from devcluster import procs
        from devcluster.layout import Layout

        procs.stop(Layout.default(), target, grace=self.GRACE.get(target, 0.0))

    def heal(self, target: str) -> None:
        with open(self.log, "ab") as out:
            done = subprocess.run(
                [sys.executable, "-c", START_ONE, target],
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=300,
                check=False,
            )
        if done.returncode != 0:
            devcluster_up(self.log)


class AirflowComponent:
    """A process of the test's Airflow deployment (``triggerer-N``, ``scheduler``)."""

    def __init__(self, deployment: Any) -> None:
        self.deployment = deployment

    def kill(self, target: str) -> None:
        self.deployment.kill(target)

    def heal(self, target: str) -> None:
        if target.startswith("triggerer"):
            self.deployment.start_triggerer(target)
        else:
            self.deployment.start_component(target)


class SpotNodeLoss:
    """A Spot VM taken away: taint and cordon, evict its pods (their grace), delete the Node; the heal brings
    the Node back."""

    def __init__(self, core: Any, log: Path, procnode_of: Mapping[str, str] | None = None) -> None:
        self.core = core
        self.log = log
        self.procnode_of = dict(procnode_of or {})  # node name -> its procnode component
        self.saved: dict[str, dict[str, Any]] = {}

    def kill(self, target: str) -> None:
        from kubernetes.client.rest import ApiException

        node = self.core.api_client.sanitize_for_serialization(self.core.read_node(target))
        self.saved[target] = node
        taints = [*(node["spec"].get("taints") or []), {**EVICTION_TAINT, "value": "true"}]
        self.core.patch_node(target, {"spec": {"unschedulable": True, "taints": taints}})
        pods = self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={target}").items
        for pod in pods:
            body = {"metadata": {"name": pod.metadata.name, "namespace": pod.metadata.namespace}}
            with contextlib.suppress(ApiException):
                self.core.create_namespaced_pod_eviction(pod.metadata.name, pod.metadata.namespace, body)
        with contextlib.suppress(ApiException):
            self.core.delete_node(target)

    def heal(self, target: str) -> None:
        from kubernetes.client.rest import ApiException

        def present() -> bool:
            try:
                self.core.read_node(target)
                return True
            except ApiException as exc:
                if exc.status == 404:
                    return False
                raise

        if target in self.procnode_of:  # the procnode re-registers its Node; if not, restart it
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not present():
                time.sleep(1)
            if not present():
                ClusterComponent(self.log).kill(self.procnode_of[target])
                devcluster_up(self.log)
            return
        saved = self.saved.pop(target)
        meta = {k: saved["metadata"][k] for k in ("name", "labels", "annotations") if k in saved["metadata"]}
        spec = {**saved.get("spec", {}), "unschedulable": False}
        spec["taints"] = [t for t in spec.get("taints") or [] if t.get("key") != EVICTION_TAINT["key"]]
        with contextlib.suppress(ApiException):  # 409: someone re-created it first
            self.core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec})


class FaultInjector:
    """Plays ``schedule(seed, ...)`` for ``duration`` seconds in a thread; one JSON line per fault in
    ``log``."""

    def __init__(
        self,
        seed: int,
        actions: Mapping[str, Action],
        targets: Mapping[str, Sequence[str]],
        duration: float,
        log: Path,
        mean_gap: float = 10.0,
        max_down: float = 6.0,
        replay: str = "",
    ) -> None:
        missing = sorted(k for k, v in targets.items() if v and k not in actions)
        if missing:
            raise ValueError(f"targets: fault kinds {missing} have no action; give one in actions")
        self.seed, self.actions, self.targets = seed, dict(actions), dict(targets)
        self.duration, self.log, self.mean_gap, self.max_down = duration, log, mean_gap, max_down
        self.replay = replay
        self.played: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-faults", daemon=True)

    def banner(self) -> str:
        kinds = ", ".join(f"{k}: {list(v)}" for k, v in sorted(self.targets.items()))
        return (
            f"fault soak: seed {self.seed}, {self.duration:.0f}s of faults, mean gap {self.mean_gap}s, "
            f"down up to {self.max_down}s; kinds {kinds}\nreplay: {self.replay}"
        )

    def start(self) -> FaultInjector:
        print(self.banner(), flush=True)
        self.started = time.time()
        self._thread.start()
        return self

    def stop(self, timeout: float = 900) -> list[dict[str, Any]]:
        """Stop after the fault in progress is healed; returns what was played."""
        self._stop.set()
        self._thread.join(timeout)
        return self.played

    def wait(self, timeout: float) -> list[dict[str, Any]]:
        self._thread.join(timeout)
        return self.played

    def _run(self) -> None:
        for fault in schedule(self.seed, self.targets, self.mean_gap, self.max_down):
            if self._stop.wait(fault.gap) or time.time() - self.started > self.duration:
                return
            entry: dict[str, Any] = {"seed": self.seed, **asdict(fault), "killed": time.time()}
            action = self.actions[fault.kind]
            try:
                action.kill(fault.target)
                time.sleep(fault.down)
            except Exception as exc:  # a kill that fails is recorded; the heal still runs
                entry["error"] = f"kill: {exc!r}"
            try:
                action.heal(fault.target)
            except Exception as exc:
                entry["error"] = f"{entry.get('error', '')} heal: {exc!r}".strip()
            entry["healed"] = time.time()
            self.played.append(entry)
            with open(self.log, "a") as out:
                out.write(json.dumps(entry) + "\n")
            print(
                f"[soak fault {fault.seq}] {fault.kind} {fault.target}: down {fault.down:.1f}s, healed in "
                f"{entry['healed'] - entry['killed']:.1f}s {entry.get('error', '')}",
                flush=True,
            )
