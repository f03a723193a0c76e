"""One shard's checkpoints and done record in Blob Storage: numbering, the resume rule, pruning.

**Every shard once.** ``done.json`` is written only if it does not exist yet (``skip_if_done``): the first pod
to finish keeps its record, and ``Shard.from_env`` exits 0 for a shard that has one.

**Progress.** Every checkpoint carries the caller's ``progress`` (a number that grows with the work done).
``load`` resumes from the checkpoint of highest progress (ties: the highest sequence number), not from the
newest one: for a short while Kubernetes may run two pods of one index, and the one that is behind must not
make its shard go backwards by writing last. Pruning keeps the ``keep`` checkpoints of highest (progress,
seq), so the most progressed one is never deleted, and a writer that is behind only adds checkpoints no reader
picks. Checkpoints without a progress (written before progress existed, or by a shard that never gives one)
rank below every checkpoint with one and among themselves by sequence number: the old newest-wins rule.

Names are write-once (``if_none_match``): a second pod of the index never overwrites a checkpoint; it takes a
number past the highest there is.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol

from ..kueue.checkpoints.checkpoint_retention import BlobInfo
from ..storage.blob_auth import check_sas_not_expired
from ..storage.blob_errors import BlobConfigError, BlobPreconditionFailed, BlobStoreError, BlobUnavailable
from ..storage.blob_retry import RetryPolicy
from ..storage.blob_store import BlobStore
from ..storage.sas_file import FileSasCredential
from . import naming
from .done_writes import DoneWrites
from .env import ShardEnv

log = logging.getLogger("airflow_kueue_provider.worker")

MAX_CHECKPOINT_BYTES = 1 << 20
CHECKPOINT_FORMAT = 1
_SEQ_CONFLICTS = 10  # taken numbers in a row before a write gives up (each one skips past the highest)
_LOAD_ATTEMPTS = 4  # listings by load() while checkpoints vanish under it (another pod pruning)

Progress = float  # ints are welcome: a JSON number that grows with the work done


class JsonStore(Protocol):
    """What a shard needs from storage (``BlobStore`` satisfies it; tests use an in-memory one)."""

    def read_json(self, name: str) -> tuple[dict[str, Any] | None, str | None]: ...

    def write_json(
        self,
        name: str,
        data: Mapping[str, Any],
        *,
        if_match: str | None = None,
        if_none_match: bool = False,
        timeout: float | None = None,
    ) -> str: ...

    def list_names(self, prefix: str) -> list[tuple[str, datetime]]: ...

    def delete(self, name: str) -> bool: ...


def check_progress(progress: object) -> Progress | None:
    if progress is None:
        return None
    if isinstance(progress, bool) or not isinstance(progress, (int, float)):
        raise TypeError(f"progress must be a number, got {type(progress).__name__}")
    if not math.isfinite(progress):
        raise ValueError(f"progress must be finite, got {progress}")
    return progress


def doc_progress(doc: Mapping[str, Any]) -> Progress | None:
    """A stored checkpoint's progress, or None (written before progress existed, or not a number)."""
    try:
        return check_progress(doc.get("progress"))
    except (TypeError, ValueError):
        return None


class CheckpointStore:
    """The checkpoints and done record of shard ``shard_id`` (index ``index``) under ``prefix``."""

    def __init__(
        self,
        shard_id: int,
        index: int,
        store: JsonStore,
        *,
        prefix: str,
        keep: int = 3,
        skip_if_done: bool = True,
        writes: DoneWrites | None = None,
    ) -> None:
        """``writes``: a pack's done-marker writes (``done_writes``), where ``mark_done`` hands its write."""
        naming.stale_seqs((), keep)  # validates keep
        self.shard_id, self.index, self.prefix = shard_id, index, prefix
        self.store, self.keep, self.skip_if_done = store, keep, skip_if_done
        self.done_writes = writes
        self._lock = threading.Lock()  # the counters below
        self._seq = 0  # the highest checkpoint number known to be taken
        # checkpoints known to exist -> (progress, ETag): what pruning ranks, and deletes only if unchanged
        self._known: dict[int, tuple[Progress | None, str | None]] = {}

    def load(self) -> tuple[int, dict[str, Any], Progress | None] | None:
        """``(seq, state, progress)`` of the checkpoint of highest progress (ties: highest sequence number),
        or None on a fresh start; later writes continue the numbering.

        Reads newest first. A checkpoint listed but gone when read was pruned by another pod of this index,
        which therefore knew better ones: the folder is listed again (a few times at most), so a pod pruning
        meanwhile cannot make this one resume from less than the best there was."""
        folder = self.folder()
        found: dict[int, tuple[Progress | None, str | None]] = {}
        loaded: dict[int, dict[str, Any]] = {}
        listed: list[int] = []
        for _ in range(_LOAD_ATTEMPTS):
            names = self.store.list_names(folder)
            seqs = sorted((s for s in (naming.checkpoint_seq(n) for n, _ in names) if s), reverse=True)
            listed += seqs
            vanished = False
            for seq in seqs:
                doc, etag = self.store.read_json(naming.checkpoint_name(self.prefix, self.shard_id, seq))
                if doc is None:
                    vanished = True
                    continue
                found[seq] = (doc_progress(doc), etag)
                if isinstance(doc.get("state"), dict):
                    loaded[seq] = doc
            if not vanished:
                break
        with self._lock:
            self._seq = max([self._seq, *listed])
            self._known.update(found)
        if not loaded:
            return None
        best = max(loaded, key=lambda s: naming.rank(doc_progress(loaded[s]), s))
        doc = loaded[best]
        state: dict[str, Any] = doc["state"]
        progress = doc_progress(doc)
        log.info(
            "shard %d resumes from checkpoint %d (%s, progress %s)",
            self.shard_id,
            best,
            doc.get("reason"),
            progress,
        )
        self.prune()
        return best, state, progress

    def mark_done(
        self, output: Mapping[str, Any], *, run_seconds: float | None = None, resumed: bool = False
    ) -> None:
        """Record that the shard finished, with a small JSON ``output`` (``done.json``). The first record
        is kept (another pod of the index may have finished first); with ``skip_if_done=False`` it is
        replaced. ``run_seconds``: how long this process ran the shard (the shard history learns lengths
        from it); ``resumed``: it started from a checkpoint, so that is only the tail of the shard. With
        ``done_writes`` the write goes out while the pack's next shard runs, and the pod waits for it."""
        doc: dict[str, Any] = {
            "format": CHECKPOINT_FORMAT,
            "shard_id": self.shard_id,
            "index": self.index,
            "finished_at": now_text(),
            "output": dict(output),
        }
        if run_seconds is not None:
            doc["run_seconds"] = round(max(0.0, run_seconds), 3)
        if resumed:
            doc["resumed"] = True
        if self.done_writes is not None:  # a pack's: written while its next shard runs
            self.done_writes.submit(self.shard_id, partial(self._write_done, doc))
        else:
            self._write_done(doc)

    def _write_done(self, doc: dict[str, Any]) -> None:
        name = naming.done_name(self.prefix, self.shard_id)
        try:
            self.store.write_json(name, doc, if_none_match=self.skip_if_done)
        except BlobPreconditionFailed:
            log.info(
                "shard %d was already marked done (another pod finished it too); its record is kept",
                self.shard_id,
            )

    def done_record(self) -> dict[str, Any] | None:
        """The shard's ``done.json``, or None while it is not done."""
        return self.store.read_json(naming.done_name(self.prefix, self.shard_id))[0]

    def is_done(self) -> bool:
        return self.done_record() is not None

    def write(
        self,
        state: dict[str, Any],
        progress: Progress | None,
        reason: str,
        store: JsonStore,
        deadline: float | None,
        *,
        quiet: bool,
    ) -> int:
        doc: dict[str, Any] = {
            "format": CHECKPOINT_FORMAT,
            "shard_id": self.shard_id,
            "index": self.index,
            "seq": 0,
            "progress": progress,
            "reason": reason,
            "saved_at": now_text(),
            "state": state,
        }
        size = len(json.dumps(doc, separators=(",", ":")))
        if size > MAX_CHECKPOINT_BYTES:
            raise ValueError(
                f"shard {self.shard_id}: checkpoint of {size} bytes exceeds {MAX_CHECKPOINT_BYTES}; keep the "
                "state small (write bulk results as their own blobs and checkpoint their names)"
            )
        for attempt in range(1, _SEQ_CONFLICTS + 1):
            if deadline is not None and time.monotonic() >= deadline:
                raise BlobUnavailable(f"shard {self.shard_id}: out of time after {attempt - 1} taken numbers")
            with self._lock:
                self._seq += 1
                doc["seq"] = seq = self._seq
            timeout = None if deadline is None else max(0.1, deadline - time.monotonic())
            name = naming.checkpoint_name(self.prefix, self.shard_id, seq)
            try:  # write-once names: a second pod of this index never overwrites a checkpoint
                etag = store.write_json(name, doc, if_none_match=True, timeout=timeout)
            except BlobPreconditionFailed:
                if not quiet:
                    log.warning(
                        "shard %d: checkpoint %d exists already (another pod?); taking one past the highest",
                        self.shard_id,
                        seq,
                    )
                self._skip_taken_numbers(store, attempt)
                continue
            with self._lock:
                self._known[seq] = (progress, etag)
            return seq
        raise BlobStoreError(
            f"shard {self.shard_id}: {_SEQ_CONFLICTS} checkpoint numbers in a row were taken"
        )

    def _skip_taken_numbers(self, store: JsonStore, attempt: int) -> None:
        """After a taken number: continue past the highest one there is (another pod writes here too), with
        a random gap that widens with each conflict, so a pod that writes more slowly than the other one does
        not keep losing the race for "highest + 1" (numbers need not be contiguous)."""
        try:
            listed = [naming.checkpoint_seq(n) for n, _ in store.list_names(self.folder())]
        except BlobStoreError:
            listed = []
        gap = random.randrange(4 * attempt)
        with self._lock:
            self._seq = max([self._seq, *(s for s in listed if s)]) + gap

    def prune(self) -> None:
        """Delete all but the ``keep`` known checkpoints of highest (progress, seq).

        Each only if it is still the blob this shard knows (its ETag): a number pruned by one pod can be taken
        again by another pod that is behind in numbering, and that blob (maybe the most progressed one) is
        not ours to delete. ``BlobStore.delete_unchanged`` makes that check on the server; with a store
        that lacks it, each blob is read and compared first (a narrower race, only for such stores)."""
        with self._lock:
            known = dict(self._known)
        stale = naming.stale_seqs(known, self.keep, rank=lambda s: naming.rank(known[s][0], s))
        if not stale:
            return
        names = {seq: naming.checkpoint_name(self.prefix, self.shard_id, seq) for seq in stale}
        conditional = getattr(self.store, "delete_unchanged", None)
        try:
            if callable(conditional):
                now = datetime.now(UTC)
                conditional([BlobInfo(names[s], now, known[s][1]) for s in stale if known[s][1] is not None])
            else:
                for seq in stale:
                    doc, etag = self.store.read_json(names[seq])
                    if doc is not None and etag is not None and etag == known[seq][1]:
                        self.store.delete(names[seq])
        except BlobStoreError as exc:  # harmless: tried again after the next save
            log.warning("shard %d: could not prune checkpoints %s: %s", self.shard_id, stale, exc)
            return
        with self._lock:  # deleted, or someone else's now: either way no longer ours to prune
            for seq in stale:
                self._known.pop(seq, None)

    def folder(self) -> str:
        return naming.shard_folder(self.prefix, self.shard_id)


def store_for(env: ShardEnv, retry: RetryPolicy) -> BlobStore:
    """The SAS the operator gives the pod (its mounted file, kept current, else its env var); else (local
    runs) a connection string; else the pod's identity."""
    if env.sas_file and os.path.isfile(env.sas_file):
        credential = FileSasCredential(env.sas_file)
        try:
            check_sas_not_expired(credential.signature, datetime.now(UTC))
        except BlobConfigError:  # the trigger may have re-signed it already: the kubelet lags a minute
            if not credential.wait_for_new():
                raise
            check_sas_not_expired(credential.signature, datetime.now(UTC))
        return BlobStore.from_sas_file(env.account_url, env.container, credential, retry=retry)
    if env.sas_token:
        check_sas_not_expired(env.sas_token, datetime.now(UTC))  # fail early, saying why
        return BlobStore.from_sas(env.account_url, env.container, env.sas_token, retry=retry)
    if env.connection_string:
        return BlobStore.from_connection_string(env.connection_string, env.container, retry=retry)
    return BlobStore.from_account_url(env.account_url, env.container, retry=retry)


def now_text() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
