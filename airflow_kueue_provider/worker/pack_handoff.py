"""A stopped pod's shards, taken over by the pods of its Job that are still running (``shard_pack``).

Why: an evicted pod's index gets its next pod only after the Job controller's pod failure backoff (10 s for
its first failure, doubling with each; kubernetes/kubernetes#119378 keeps it for the failures a pod failure
policy ignores), and its Job cannot end before that index's shards are done. Meanwhile the Job's other pods
run out of work: each one, once its own pack is done, takes the stopped pack's rest instead.

The protocol, in the task's shard container:

- A pod told to stop (SIGTERM) writes ``<prefix>/released/<layout>/index-<i>.json``: the shards of its pack
  it had not finished. ``<layout>`` keys the Job's shard list and packing, so a later try with other packs
  never reads it.
- A pod whose own pack is done lists that folder and takes released shards over one at a time: it claims
  each (``shards/<id>/claim.json``: created only where there is none, or written over a released or expired
  one by its ETag), runs it and writes its done record, as for its own shards.
- A claim is a lease. Its holder renews it every third of ``LEASE_SECONDS`` while the shard runs and marks
  it released when the shard ends undone (an error, a SIGTERM); a holder that dies without a word loses it
  when the lease runs out.
- The stopped pod then waits, inside its grace, for the done records of the shards it released: when the
  Job's other pods finish them it exits 0 (a deleted pod whose containers exit 0 is Succeeded), and its
  index is done without a next pod; when none of them is claimed for ``UNCLAIMED_SECONDS``, or the grace
  runs out, it exits 143 as before (``finished_elsewhere``).
- The next pod of a stopped index reads its index's record once, when it starts. The shards it lists are
  claimed before they run; those another pod holds are waited for at the end. A pod exits 0 only once
  every shard of its own pack has a done record, so no index, and no Job, succeeds with a shard undone.

Every write two pods could race on is conditional: a shard runs in one pod at a time, except when a holder
outlives its lease unseen (for longer than ``LEASE_SECONDS`` without one renewal), and then the first done
record is kept, as for two pods of one index. ``NoHandOff`` is the same seam doing nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..kueue.checkpoints.shard_blob_names import (
    claim_name,
    done_name,
    done_shard_ids,
    released_folder,
    released_name,
    shards_folder,
)
from ..kueue.index_set import IndexSet
from ..storage.blob_errors import BlobPreconditionFailed, BlobStoreError
from .checkpoint_store import CHECKPOINT_FORMAT, JsonStore

log = logging.getLogger("airflow_kueue_provider.worker")

LEASE_SECONDS = 60.0
"""How long a claim holds without a renewal: what a pod that died unseen costs the shard's owner."""
POLL_SECONDS = 2.0
"""How often a pod waiting for a shard another pod holds looks again."""
RELEASE_TIMEOUT_SECONDS = 2.0
"""The release record is written in the SIGTERM's grace, after the flush: one short request."""
GRACE_POLL_SECONDS = 0.5
"""How often a stopped pod looks whether the shards it released are done (``finished_elsewhere``)."""
UNCLAIMED_SECONDS = 5.0
"""How long a stopped pod waits for a pod of its Job to claim a shard it released before it leaves it to its
index's next pod (a Job whose other pods are all busy takes none until their packs end)."""


def holder_name() -> str:
    """This process, as its claims name it: the pod, the process and a random part."""
    host = os.environ.get("HOSTNAME") or socket.gethostname()
    return f"{host}/{os.getpid()}/{secrets.token_hex(3)}"


class NoHandOff:
    """Nothing released, nothing taken over: a pod runs its own pack only (``take_over=False``)."""

    def released_here(self, own: Sequence[int]) -> frozenset[int]:
        return frozenset()

    def claim(self, shard_id: int) -> bool:
        return True

    def finished(self, shard_id: int, *, done: bool) -> None:
        return None

    def take_over(self, own: Iterable[int]) -> int | None:
        return None

    def gave_up(self, shard_id: int) -> None:
        return None

    def wait_or_claim(self, shard_id: int, stop: threading.Event) -> bool:
        return False

    def release(self, rest: Sequence[int]) -> None:
        return None

    def finished_elsewhere(self, rest: Sequence[int], deadline: float) -> bool:
        return False

    def close(self) -> None:
        return None


class BlobHandOff(NoHandOff):
    """The protocol above for pod ``index`` of a Job whose layout key is ``layout``."""

    def __init__(
        self,
        store: JsonStore,
        prefix: str,
        layout: str,
        index: int,
        *,
        holder: str | None = None,
        lease_seconds: float = LEASE_SECONDS,
        poll_seconds: float = POLL_SECONDS,
        clock: Callable[[], float] = time.time,
        job_shards: IndexSet | None = None,
    ) -> None:
        """``job_shards``: the Job's shard ids; a release record naming others is not followed there."""
        self.store, self.prefix, self.layout, self.index = store, prefix, layout, index
        self.job_shards = job_shards
        self.holder = holder or holder_name()
        self.lease_seconds, self.poll_seconds, self._clock = lease_seconds, poll_seconds, clock
        self._lock = threading.Lock()
        self._held: dict[int, str] = {}  # shard -> the ETag of this pod's claim
        self._gave_up: set[int] = set()  # taken over and failed here: left to their own index
        self._records: dict[str, tuple[Any, list[int]]] = {}  # release record -> (its time, its shards)
        self._renewing = threading.Event()
        self._renewer: threading.Thread | None = None
        self.taken: list[int] = []

    # -- the pod's own pack --

    def released_here(self, own: Sequence[int]) -> frozenset[int]:
        """The shards of this pod's pack a stopped pod of its index released (others may hold them). Blob
        failing here (after the store's retries) costs at most a shard run twice, never the pod."""
        try:
            doc, _ = self.store.read_json(released_name(self.prefix, self.layout, self.index))
        except BlobStoreError as exc:
            log.warning(
                "index %d: its release record could not be read (%s); running its pack", self.index, exc
            )
            return frozenset()
        listed = set(_shards_of(doc))
        return frozenset(s for s in own if s in listed)

    def release(self, rest: Sequence[int]) -> None:
        """Told to stop: the shards of the pack not finished here go on record for the Job's other pods."""
        if not rest:
            return
        doc = {"format": CHECKPOINT_FORMAT, "index": self.index, "holder": self.holder, "shards": list(rest)}
        try:
            name = released_name(self.prefix, self.layout, self.index)
            self.store.write_json(name, doc, timeout=RELEASE_TIMEOUT_SECONDS)
        except BlobStoreError as exc:  # the index's next pod runs them itself, as before
            log.warning("index %d: the release of shards %s was not written: %s", self.index, list(rest), exc)

    def finished_elsewhere(self, rest: Sequence[int], deadline: float) -> bool:
        """After a stop and the release of ``rest``: whether the Job's other pods finish every shard of it
        by ``deadline`` (monotonic), so that this pod exits 0 and its index needs no next pod (which the Job
        controller's backoff holds back 10 s or more); ``wait_for_rest``."""
        return wait_for_rest(self.store, self.prefix, self.holder, rest, deadline, self._clock)

    # -- claims --

    def claim(self, shard_id: int) -> bool:
        """Hold ``shard_id`` (True), or leave it to the live pod that holds it (False). Blob failing here
        (after the store's retries) counts as held: the shard runs, at worst twice."""
        try:
            return self._claim(shard_id)
        except BlobPreconditionFailed:
            return False
        except BlobStoreError as exc:
            log.warning("shard %d: its claim could not be written (%s); running it", shard_id, exc)
            return True

    def _claim(self, shard_id: int) -> bool:
        name = claim_name(self.prefix, shard_id)
        for _ in range(3):  # a claim deleted between the create and the read: try again
            try:
                self._hold(
                    shard_id, self.store.write_json(name, self._claim_doc(shard_id), if_none_match=True)
                )
                return True
            except BlobPreconditionFailed:
                pass
            doc, etag = self.store.read_json(name)
            if doc is None or etag is None:
                continue
            if doc.get("holder") == self.holder and not doc.get("released"):
                self._hold(shard_id, etag)
                return True
            if not doc.get("released") and _lease_end(doc) > self._clock():
                return False
            try:  # released or expired: over its ETag, so of two pods taking it one wins
                self._hold(shard_id, self.store.write_json(name, self._claim_doc(shard_id), if_match=etag))
                return True
            except BlobPreconditionFailed:
                return False
        return False

    def finished(self, shard_id: int, *, done: bool) -> None:
        """The shard's block ended here: a claim on a shard left undone is released for another pod."""
        with self._lock:
            etag = self._held.pop(shard_id, None)
        if etag is None or done:
            return
        doc = {**self._claim_doc(shard_id), "released": True}
        with contextlib.suppress(BlobStoreError):  # taken by then, or Blob down: its lease runs out instead
            self.store.write_json(claim_name(self.prefix, shard_id), doc, if_match=etag, timeout=2.0)

    # -- taking over --

    def take_over(self, own: Iterable[int]) -> int | None:
        """A released shard of another pack, claimed for this pod and not done yet; None when none is left.

        One listing of the release records, and when they name shards not seen here, one of the shards'
        folder for their done records: a pod's end costs one or two LISTs, not a read per shard."""
        seen = set(own).union(self._gave_up, self.taken)
        try:
            candidates = [s for s in self._released_shards() if s not in seen and self._in_job(s)]
            if not candidates:
                return None
            head = shards_folder(self.prefix)
            done = done_shard_ids((name for name, _ in self.store.list_names(head)), self.prefix)
        except BlobStoreError as exc:  # their own indexes run them
            log.warning("index %d: released shards not looked for (%s)", self.index, exc)
            return None
        for shard_id in candidates:
            if shard_id in done or not self._claim_quietly(shard_id):
                continue
            if self._finish_if_done(shard_id):  # done by its holder just before its claim ran out
                continue
            self.taken.append(shard_id)
            return shard_id
        return None

    def _claim_quietly(self, shard_id: int) -> bool:
        """A claim for taking over: one that cannot be written is not taken (its own index runs it)."""
        try:
            return self._claim(shard_id)
        except BlobStoreError:
            return False

    def gave_up(self, shard_id: int) -> None:
        """A shard taken over here failed: its own index runs it, not this pod again."""
        self._gave_up.add(shard_id)

    def wait_or_claim(self, shard_id: int, stop: threading.Event) -> bool:
        """Wait until ``shard_id`` (of this pod's pack, held by another pod) is done (False) or can be
        claimed here (True: run it); returns at once when ``stop`` is set (False)."""
        said, warned = False, False
        while not stop.is_set():
            try:
                if self._is_done(shard_id):
                    return False
                if self._claim(shard_id):
                    return not self._finish_if_done(shard_id)
            except BlobStoreError as exc:  # looked at again at the next poll (said once)
                if not warned:
                    log.warning("index %d: shard %d not looked at (%s); trying on", self.index, shard_id, exc)
                warned = True
            if not said:
                log.info("index %d: waiting for shard %d, which another pod took over", self.index, shard_id)
                said = True
            stop.wait(self.poll_seconds)
        return False

    def close(self) -> None:
        self._renewing.set()

    # -- inside --

    def _in_job(self, shard_id: int) -> bool:
        return self.job_shards is None or shard_id in self.job_shards

    def _finish_if_done(self, shard_id: int) -> bool:
        """Whether a shard just claimed is done after all (its claim then kept); unread: not done (run it,
        at worst twice)."""
        try:
            done = self._is_done(shard_id)
        except BlobStoreError:
            return False
        if done:
            self.finished(shard_id, done=True)
        return done

    def _is_done(self, shard_id: int) -> bool:
        return self.store.read_json(done_name(self.prefix, shard_id))[0] is not None

    def _released_shards(self) -> list[int]:
        """The shards of every release record of the layout (records read again only when rewritten)."""
        folder = released_folder(self.prefix, self.layout)
        shards: list[int] = []
        for name, modified in sorted(self.store.list_names(folder)):
            known = self._records.get(name)
            if known is None or known[0] != modified:
                known = (modified, _shards_of(self.store.read_json(name)[0]))
                self._records[name] = known
            shards.extend(known[1])
        return shards

    def _claim_doc(self, shard_id: int) -> dict[str, Any]:
        until = self._clock() + self.lease_seconds
        return {"format": CHECKPOINT_FORMAT, "shard_id": shard_id, "holder": self.holder, "until": until}

    def _hold(self, shard_id: int, etag: str) -> None:
        with self._lock:
            self._held[shard_id] = etag
            if self._renewer is None:
                self._renewer = threading.Thread(target=self._renew, name="kueue-claim-renew", daemon=True)
                self._renewer.start()

    def _renew(self) -> None:
        """Each held claim's lease pushed on, under the lock: ``finished`` then releases the claim by the
        ETag this write left, never by one it replaced."""
        while not self._renewing.wait(self.lease_seconds / 3):
            for shard_id in list(self._held):
                with self._lock:
                    etag = self._held.get(shard_id)
                    if etag is None:
                        continue
                    try:
                        name = claim_name(self.prefix, shard_id)
                        doc = self._claim_doc(shard_id)
                        self._held[shard_id] = self.store.write_json(name, doc, if_match=etag, timeout=5.0)
                    except BlobPreconditionFailed:
                        log.warning("shard %d: another pod took its claim over (renewed too late)", shard_id)
                        del self._held[shard_id]
                    except BlobStoreError:
                        pass  # tried again at the next renewal, well inside the lease


def wait_for_rest(
    store: JsonStore,
    prefix: str,
    holder: str,
    rest: Sequence[int],
    deadline: float,
    clock: Callable[[], float] = time.time,
) -> bool:
    """Whether every shard of ``rest`` gets its done record by ``deadline`` (monotonic), looked for every
    ``GRACE_POLL_SECONDS``. False, for the stopped index's next pod to run them, once none of them has had a
    live claim of another holder for ``UNCLAIMED_SECONDS`` (a pod taking them over runs them one after the
    other), at the deadline, or when Blob cannot say (``clock``: the claims' time, as they were written)."""
    left, idle_since = set(rest), time.monotonic()
    while left:
        now = time.monotonic()
        try:
            listed = store.list_names(shards_folder(prefix))
            done = done_shard_ids((name for name, _ in listed), prefix)
            left = {shard_id for shard_id in left if shard_id not in done}
            if any(_held_elsewhere(store, prefix, holder, shard_id, clock()) for shard_id in sorted(left)):
                idle_since = now
            elif left and now - idle_since >= UNCLAIMED_SECONDS:
                return False
        except BlobStoreError as exc:
            log.warning("its released shards not looked at (%s): its index's next pod runs them", exc)
            return False
        if left and now + GRACE_POLL_SECONDS >= deadline:
            return False
        if left:
            time.sleep(GRACE_POLL_SECONDS)
    return True


def _held_elsewhere(store: JsonStore, prefix: str, holder: str, shard_id: int, now: float) -> bool:
    doc, _ = store.read_json(claim_name(prefix, shard_id))
    if doc is None or doc.get("released") or doc.get("holder") == holder:
        return False
    return _lease_end(doc) > now


def _shards_of(doc: dict[str, Any] | None) -> list[int]:
    """A release record's shard ids (a record that is not one gives none)."""
    shards = (doc or {}).get("shards")
    if not isinstance(shards, list):
        return []
    return [s for s in shards if isinstance(s, int) and not isinstance(s, bool) and s >= 0]


def _lease_end(doc: dict[str, Any]) -> float:
    """A claim's ``until`` (a claim without a number there has run out)."""
    until = doc.get("until")
    return float(until) if isinstance(until, (int, float)) and not isinstance(until, bool) else 0.0
