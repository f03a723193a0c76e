"""The worker SDK's done records for the night's fake pods (``--done-records``): KWOK runs no program, so the
bed writes the ``done.json`` records the pods' SDK would have written (``run_seconds``: each shard's drawn
length, from the pod's ``shard-durations`` annotation), and gives a pod only the shards without one.

- A pod that succeeds: a record for each shard it ran. A record goes out a few milliseconds after the pod's
  Succeeded is seen, not before the pod ends as the SDK's does: one the operator lists before it lands is a
  shard it does not learn that night.
- A pod told to stop while running (evicted, its node lost, its Workload preempted): a record for each shard
  of its run it had finished by then (its pack in order, from when it was seen Running), as the SDK writes
  each shard's record when the shard ends.
- A pod whose pack holds shards that already have a record (the replacement of a stopped pod, or an index
  run again after its Workload came back): patched with ``run-remaining`` (``devcluster/fake_pod_lengths``),
  the sum of the rest, as an SDK program skips the done shards. The patch lands while the pod is Pending, as
  a rule; when it lands after the pod started, KWOK counts the rest from the patch (a few milliseconds more).

- The hand-off of a stopped pack's rest (``hand_off``, on by default; ``pack_handoff`` keeps its books): a
  pod told to stop releases the shards of its run it had not finished (the one in progress included, run
  again whole: its checkpoint is not modelled), and the Job's running pods take them over, each one's end
  patched later by the shards it took (``run-remaining``, from its expected end); the owner index's next pod
  shares the shards no pod has started with them (whoever is free first) and ends no earlier than the ones
  other pods run. A pod that succeeds writes
  the records of every shard it ran, the ones it took over included.

The operator then learns each shard's length from done records, as it does for a worker-SDK program, and a
later night packs from them (``docs/shard-history.md``); without them a fake pod's times serve the forecast
only and a replacement pod runs its whole pack again.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from airflow_kueue_provider.kueue.checkpoints.shard_blob_names import done_name
from airflow_kueue_provider.kueue.checkpoints.shard_packing import ShardPacks
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.names import (
    CHECKPOINT_PREFIX_ENV,
    CHECKPOINT_URL_ENV,
    GRACE_ENV,
    INDEX_ANNOTATION,
    SHARDS_ENV,
    SHARDS_PER_POD_ENV,
)
from airflow_kueue_provider.worker.checkpoint_store import CHECKPOINT_FORMAT, now_text
from airflow_kueue_provider.worker.sigterm_flush import FLUSH_MARGIN_SECONDS
from devcluster.fake_pod_lengths import RUN_REMAINING_ANNOTATION, SHARD_DURATIONS_ANNOTATION
from devcluster.manifests import GRACE_EXIT_ANNOTATION

from .pack_handoff import PATCH_TOLERANCE_SECONDS, PackHandOff


def pod_env(pod: dict[str, Any]) -> dict[str, str]:
    """The main container's plain env values (a Secret's ``valueFrom`` is left out)."""
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return {e["name"]: e["value"] for e in containers[0].get("env") or [] if "value" in e}


def shards_run_by(pod: dict[str, Any]) -> list[tuple[int, float]] | None:
    """``[(shard id, seconds)]`` a fake pod ran (its index's pack, in order), or None for a pod without the
    SDK's env or the per-shard lengths."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    lengths, index = annotations.get(SHARD_DURATIONS_ANNOTATION), annotations.get(INDEX_ANNOTATION)
    env = pod_env(pod)
    if not lengths or index is None or SHARDS_ENV not in env:
        return None
    seconds = [float(s) for s in lengths.split(",")]
    packs = ShardPacks.parse(IndexSet.parse(env[SHARDS_ENV]), env.get(SHARDS_PER_POD_ENV) or "1")
    return [(shard, seconds[shard]) for shard in packs.run_order_of_index(int(index))]


def finished_by(run: list[tuple[int, float]], elapsed: float) -> list[tuple[int, float]]:
    """The shards of ``run`` (in order) a pod running for ``elapsed`` seconds had finished."""
    finished: list[tuple[int, float]] = []
    total = 0.0
    for shard, seconds in run:
        total += seconds
        if total > elapsed:
            break
        finished.append((shard, seconds))
    return finished


def remaining_ms(run: list[tuple[int, float]]) -> str:
    """``run``'s length as the Go duration KWOK reads (``"5400ms"``)."""
    return f"{int(sum(seconds for _, seconds in run) * 1000)}ms"


@dataclass
class GraceWait:
    """A stopped pod waiting in its grace for the shards it released (the SDK's ``finished_elsewhere``)."""

    key: tuple[str, str]
    rest: list[int]
    deadline: float
    end: float  # when KWOK was told to end it Succeeded
    namespace: str
    name: str


@dataclass(frozen=True)
class PodRun:
    """What one pod runs: its place (container, prefix), its index and the shards without a record when it
    was first seen, in its pack's order."""

    container: str
    prefix: str
    index: int
    shards: list[tuple[int, float]]


class DoneRecords:
    """Writes each pod's done records once, on a few threads, and patches a pod's remainder (the recorder's
    watch threads call ``pod_seen``, ``pod_running``, ``pod_stopping``, ``pod_succeeded`` and ``pod_ended``
    in the order of the pods' events, and each returns at once)."""

    def __init__(
        self, blob_service: Any, core: Any, hand_off: bool = True, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._service = blob_service  # an azure BlobServiceClient
        self._core = core  # a kubernetes CoreV1Api
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="night-done")
        self._patches = ThreadPoolExecutor(max_workers=2, thread_name_prefix="night-remaining")
        self._lock = threading.Lock()
        self._runs: dict[str, PodRun] = {}  # pod uid -> its run
        self._done: dict[tuple[str, str], set[int]] = {}  # (container, prefix) -> shards with a record
        self._written_for: set[str] = set()  # pod uids whose records went out
        self._hand = PackHandOff() if hand_off else None
        self._clock = clock
        self._names: dict[str, tuple[str, str]] = {}  # pod uid -> (namespace, name), for its patches
        self._queued: set[str] = set()  # pod uids with a patch not started yet
        self._patching: dict[str, threading.Lock] = {}  # pod uid -> held while its patch is computed and sent
        self.written = 0
        self.records_existing = 0  # records found already there (0 unless two pods ran one shard)
        self.remainders = 0  # pods patched to run only their shards without a record
        self.kept: dict[str, float] = {}  # stopped pod's name -> shard-seconds its records kept
        self.errors: list[str] = []
        self._own: dict[str, tuple[list[int], float]] = {}  # pod uid -> (its pack, its SDK grace)
        self._stopped: set[str] = set()  # pod uids stopped in the books
        self._waiting: dict[str, GraceWait] = {}  # pod uid -> its wait, while KWOK is told it exits 0
        self.grace_exits = 0  # evicted pods told to end Succeeded (their rest finished by others)

    @property
    def handed_off(self) -> int:
        """Shards a stopped pod released that another running pod of the Job took over."""
        return self._hand.handed_off if self._hand is not None else 0

    def phase_fields(self) -> dict[str, Any]:
        """The figures a phase keeps (``runner.PhaseRecord``'s fields)."""
        with self._lock:
            return {
                "kept_by_done_records": dict(self.kept),
                "handed_off": self.handed_off,
                "grace_exits": self.grace_exits,
                "records_existing": self.records_existing,
            }

    @classmethod
    def connect(cls, connection_string: str, api_client: Any, hand_off: bool = True) -> DoneRecords:
        from azure.storage.blob import BlobServiceClient
        from kubernetes import client

        # the SDK logs every request's headers at INFO: the night's output is its table, not them
        logging.getLogger("azure.core.pipeline.policies.http_logging_policy").setLevel(logging.WARNING)
        service = BlobServiceClient.from_connection_string(connection_string)
        return cls(service, client.CoreV1Api(api_client), hand_off=hand_off)

    def pod_seen(self, pod: dict[str, Any]) -> None:
        """A new pod: what it runs, and its remainder patched when part of its pack has records (or, with
        the hand-off, is run by another pod)."""
        ran, env = shards_run_by(pod), pod_env(pod)
        url, prefix = env.get(CHECKPOINT_URL_ENV), env.get(CHECKPOINT_PREFIX_ENV)
        if ran is None or not url or prefix is None:
            return
        meta = pod["metadata"]
        container, prefix = url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1], prefix.strip("/")
        patches: list[str] = []
        with self._lock:
            done = self._done.setdefault((container, prefix), set())
            index = int(meta["annotations"][INDEX_ANNOTATION])
            if self._hand is None:
                rest = [(shard, seconds) for shard, seconds in ran if shard not in done]
            else:
                now = self._clock()
                plan, moved = self._hand.seen(meta["uid"], (container, prefix), index, ran, done, now)
                rest = plan.run  # the same list: the shards it takes over join it
                self._names[meta["uid"]] = (meta["namespace"], meta["name"])
                force = frozenset([meta["uid"]] if len(rest) < len(ran) else [])
                patches = self._hand.to_patch(moved, now, force)
            self._runs[meta["uid"]] = PodRun(container, prefix, index, rest)
            self._own[meta["uid"]] = ([shard for shard, _ in ran], float(env.get(GRACE_ENV) or 25))
            if len(rest) < len(ran):
                self.remainders += 1
        if self._hand is None and len(rest) < len(ran):
            self._patches.submit(self._patch, meta["namespace"], meta["name"], remaining_ms(rest))
        self._send(patches)

    def pod_running(self, pod: dict[str, Any]) -> None:
        """A pod first seen Running: its shards' times start (the hand-off's books only)."""
        if self._hand is None:
            return
        with self._lock:
            now = self._clock()
            patches = self._hand.to_patch(self._hand.running(pod["metadata"]["uid"], now), now)
        self._send(patches)

    def pod_stopping(self, pod: dict[str, Any], running_for: float) -> None:
        """A pod told to stop after ``running_for`` seconds Running: the records of the shards it finished;
        with the hand-off, the rest of its run goes to the Job's running pods."""
        meta = pod["metadata"]
        self._stop(meta["uid"], meta["name"], running_for)

    def before_eviction(self, uid: str, namespace: str, name: str) -> None:
        """A running pod the night is about to evict: stopped in the books now, and when the pods that took
        its released shards over finish them within its grace, annotated so that KWOK ends it Succeeded
        then (``grace-exit``), before the eviction lands; else it fails at the eviction, as before."""
        with self._lock:
            plan = self._hand.plans.get(uid) if self._hand is not None else None
            running_at = plan.running_at if plan is not None else None
        if running_at is None or not self._stop(uid, name, self._clock() - running_at):
            return
        with self._lock:
            run, (own, grace) = self._runs[uid], self._own[uid]
            key, now = (run.container, run.prefix), self._clock()
            done = self._done.get(key, set())
            rest = [shard for shard in own if shard not in done]
            end = self._hand.grace_end(key, rest, done, now) if self._hand is not None else None
            deadline = now + grace - FLUSH_MARGIN_SECONDS
            if end is None or end > deadline:
                return
            self._waiting[uid] = GraceWait(key, rest, deadline, end, namespace, name)
            self.grace_exits += 1
        self._annotate(namespace, name, GRACE_EXIT_ANNOTATION, f"{round(max(0.0, end - now) * 1000)}ms")

    def _stop(self, uid: str, name: str, running_for: float) -> bool:
        """Stop the pod in the books once (False: not a pod run here, or stopped already)."""
        run = self._runs.get(uid)
        patches: list[str] = []
        with self._lock:
            if run is None or uid in self._stopped:
                return False
            self._stopped.add(uid)
            now = self._clock()
            stopped = self._hand.stopping(uid, running_for, now) if self._hand is not None else None
            if stopped is None:
                finished = finished_by(run.shards, running_for)
            else:
                finished, moved = stopped
                patches = self._hand.to_patch(moved, now) if self._hand is not None else []
            self.kept[name] = round(sum(seconds for _, seconds in finished), 3)
        self._record(uid, run, finished)
        self._send(patches)
        return True

    def _regrace(self) -> None:
        """The waiting pods whose rest moved: a new end, or "fail" once it is not finished in time."""
        told: list[tuple[GraceWait, str]] = []
        with self._lock:
            if self._hand is None or not self._waiting:
                return
            now = self._clock()
            for uid, wait in list(self._waiting.items()):
                end = self._hand.grace_end(wait.key, wait.rest, self._done.get(wait.key, set()), now)
                if end is None or end > wait.deadline:
                    del self._waiting[uid]
                    self.grace_exits -= 1
                    told.append((wait, "fail"))
                elif abs(end - wait.end) > PATCH_TOLERANCE_SECONDS:
                    wait.end = end
                    told.append((wait, f"{round(max(0.0, end - now) * 1000)}ms"))
        for wait, value in told:
            self._patches.submit(self._annotate, wait.namespace, wait.name, GRACE_EXIT_ANNOTATION, value)

    def pod_succeeded(self, pod: dict[str, Any]) -> None:
        """A pod that ran to the end: the records of every shard it ran, the ones it took over included (the
        recorder tells ``pod_seen`` first, in the same call when the first sight is its end)."""
        uid = pod["metadata"]["uid"]
        run = self._runs.get(uid)
        if run is None:
            return
        patches: list[str] = []
        late: list[tuple[int, float]] = []
        with self._lock:
            now = self._clock()
            ended = self._hand.succeeded(uid, now) if self._hand is not None else None
            shards = list(run.shards)
            if ended is not None and self._hand is not None:
                shards, late, moved = ended
                patches = self._hand.to_patch(moved, now)
        if late:  # outside the lock: _error takes it
            self._error(f"pod {pod['metadata']['name']} ended before its taken-over shards {late}")
        self._record(uid, run, shards)
        self._send(patches)

    def pod_ended(self, pod: dict[str, Any]) -> None:
        """A pod's first terminal phase or deletion: one neither told to stop nor succeeded (its node lost)
        leaves the hand-off's books; the shards it took over and finished keep their records."""
        if self._hand is None:
            return
        uid = pod["metadata"]["uid"]
        with self._lock:
            self._waiting.pop(uid, None)
            now = self._clock()
            finished, moved = self._hand.ended(uid, now)
            patches = self._hand.to_patch(moved, now)
        run = self._runs.get(uid)
        if run is not None and finished:
            self._record(uid, run, finished)
        self._send(patches)

    def _record(self, uid: str, run: PodRun, shards: list[tuple[int, float]]) -> None:
        """Marks ``shards`` done at once (a pod seen next runs without them), then writes their records."""
        with self._lock:
            if uid in self._written_for:
                return
            self._written_for.add(uid)
            self._done.setdefault((run.container, run.prefix), set()).update(s for s, _ in shards)
        if shards:
            self._pool.submit(self._write, run.container, run.prefix, run.index, list(shards))

    def _send(self, uids: list[str]) -> None:
        """A patch for each pod, unless one not started yet is queued (it sends the latest remainder); and
        the waiting pods' ends, which the moves may have changed."""
        self._regrace()
        for uid in uids:
            with self._lock:
                if uid in self._queued:
                    continue
                self._queued.add(uid)
            self._patches.submit(self._patch_latest, uid)

    def _patch_latest(self, uid: str) -> None:
        """The pod's remainder from its expected end when the patch is sent; one patch of a pod at a time, so
        the last one sent carries the last value."""
        with self._lock:
            held = self._patching.setdefault(uid, threading.Lock())
        with held:
            with self._lock:
                self._queued.discard(uid)
                remaining = self._hand.remaining(uid, self._clock()) if self._hand is not None else None
                namespace, name = self._names.get(uid, ("", ""))
            if remaining is not None and name:
                self._patch(namespace, name, f"{round(remaining * 1000)}ms")

    def _patch(self, namespace: str, name: str, remaining: str) -> None:
        self._annotate(namespace, name, RUN_REMAINING_ANNOTATION, remaining)

    def _annotate(self, namespace: str, name: str, annotation: str, value: str) -> None:
        body = {"metadata": {"annotations": {annotation: value}}}
        try:
            self._core.patch_namespaced_pod(name, namespace, body)
        except Exception as exc:  # recorded, never the night's end (a pod gone before its patch)
            self._error(f"{annotation.rsplit('/', 1)[-1]} of pod {namespace}/{name}: {exc}")

    def _error(self, text: str) -> None:
        with self._lock:
            if len(self.errors) < 50:
                self.errors.append(text[:300])

    def _write(self, container: str, prefix: str, index: int, ran: list[tuple[int, float]]) -> None:
        from azure.core.exceptions import ResourceExistsError

        client = self._service.get_container_client(container)
        for shard, seconds in ran:
            doc = {
                "format": CHECKPOINT_FORMAT, "shard_id": shard, "index": index, "finished_at": now_text(),
                "output": {}, "run_seconds": seconds,
            }  # fmt: skip
            try:  # the first record is kept, as the SDK's if-none-match write keeps it
                client.upload_blob(done_name(prefix, shard), json.dumps(doc), overwrite=False)
                with self._lock:
                    self.written += 1
            except ResourceExistsError:
                with self._lock:
                    self.records_existing += 1
            except Exception as exc:  # recorded, never the night's end
                self._error(f"done record of shard {shard} in {container}/{prefix}: {exc}")

    def close(self) -> None:
        self._patches.shutdown(wait=True)
        self._pool.shutdown(wait=True)
