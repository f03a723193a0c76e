"""A shard's checkpoints in Blob Storage, and the SIGTERM flush that fits the 30 s Spot eviction window.

Typical use (see ``sample_shard.py``)::

    with Shard.from_env() as shard:          # a shard already marked done exits 0 here (see below);
        state = shard.load() or {"next": 0}  # resume from the most progressed checkpoint
        for i in range(state["next"], n):
            work(i)
            with shard.critical():            # a SIGTERM waits until the block ends...
                record(i)
                state = {"next": i + 1}
                shard.set_latest(state, progress=i + 1)  # ...and then flushes this (cheap: no I/O)
            if (i + 1) % k == 0:
                shard.save(state, progress=i + 1)  # periodic checkpoint: one small upload
        shard.mark_done({"items": n})

**Every shard once.** ``from_env`` looks for the shard's ``done.json`` first: a shard another pod (a retry, a
duplicate pod of the same index, an earlier try of the task) already finished ends the process at once with
exit code 0 (``ShardAlreadyDone``, a ``SystemExit``), before the program does any work, so Kubernetes counts
the index done and nothing is redone. ``mark_done`` writes ``done.json`` only if it does not exist yet: the
first pod to finish keeps its record. ``from_env(skip_if_done=False)`` opts out (a shard that must run again
whatever it did before; its ``mark_done`` then overwrites).

**Progress.** Every checkpoint carries the caller's ``progress`` (a number that grows with the work done, e.g.
items finished). ``load()`` resumes from the checkpoint of highest progress (ties: the highest sequence
number), not from the newest one: for a short while Kubernetes may run two pods of one index, and the one that
is behind must not make its shard go backwards by writing last. Pruning keeps the ``keep`` checkpoints of
highest (progress, seq), so the most progressed one is never deleted, and a writer that is behind only adds
checkpoints no reader picks. Without ``progress`` a checkpoint inherits the shard's current progress (the
loaded one, or the last one given); a shard that never gives one writes checkpoints without it. Those, and
checkpoints written before progress existed, rank below every checkpoint with a progress and among
themselves by sequence number: the old newest-wins rule.

**SIGTERM.** The handler only notes the time and writes one byte to a pipe (``os.write``: async-signal-safe,
no Python lock, no logging, no other I/O); the C-level ``signal.set_wakeup_fd`` writes to the same pipe,
so the flush starts even while the main thread is stuck in a C call that has not yet let the Python
handler run. A daemon thread started by ``handle_sigterm`` blocks in ``os.read`` on that pipe, then:

1. waits until no ``critical()`` block is open (a SIGTERM inside one flushes when it ends), but no longer
   than ``deadline - min(FLUSH_UPLOAD_SECONDS, budget / 2)``, where ``deadline = signal time + grace_seconds
   - FLUSH_MARGIN_SECONDS`` and ``budget`` is that span: a block that outlasts it is split, and what
   ``latest`` holds then is flushed (the work of that block is then done again after the restart);
2. closes the gate: from then on the main thread cannot enter a new critical block or save (it stops there);
3. uploads ``latest`` with its progress through ``flush_store`` in a helper thread bounded by the deadline.
   Neither thread logs: records other code (the Blob hook's retry warnings, the Azure SDK) emits in them
   are dropped by a filter that runs before a handler takes its lock, because the main thread may be
   inside a logging call, holding that lock, for as long as its handler is slow;
4. records the outcome in plain attributes and stops the main thread: ``SystemExit(143)`` raised in it by
   the handler (``signal.pthread_kill`` interrupts a sleep or a socket wait), or, if the main thread already
   waits at a safe point (``critical()``, ``save()``, ``close()``), raised there. The main thread then logs
   the outcome and unwinds normally (``finally`` blocks and context managers run);
5. if the process still runs ``EXIT_WAIT_SECONDS`` later (the main thread is stuck: a C call that does not
   return, a logging handler that never does), it flushes stdio best-effort, writes the outcome to fd 2
   unless the main thread logged it, and ends the process with ``os._exit(143)`` - never later than
   ``FLUSH_MARGIN_SECONDS / 2`` before the grace period ends, so Kubernetes never has to SIGKILL it.

Exiting from the main thread first is preferred because it runs the program's cleanup; ``os._exit`` is the
backstop that makes the exit independent of what the main thread is doing. The flush never starts a big
upload: a state over ``MAX_CHECKPOINT_BYTES`` is refused by ``save`` and skipped by the flush.
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import os
import random
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from types import FrameType, TracebackType
from typing import Any, NoReturn, Protocol

from ..kueue.checkpoint_retention import BlobInfo
from ..kueue.names import CHECKPOINT_URL_ENV
from ..storage.blob_store import (
    BlobPreconditionFailed,
    BlobStore,
    BlobStoreError,
    BlobUnavailable,
    RetryPolicy,
    account_url_from_connection_string,
    redact,
)
from . import naming
from .env import CONNECTION_STRING, ShardEnv

log = logging.getLogger("airflow_kueue_provider.worker")

EXIT_SIGTERM = 143  # 128 + SIGTERM, what a shell reports for a process killed by SIGTERM
FLUSH_MARGIN_SECONDS = 2.0  # of the grace period, kept for thread wake-up and process exit
FLUSH_UPLOAD_SECONDS = 5.0  # kept for the upload when a critical block outlasts the budget (≤ half of it)
EXIT_WAIT_SECONDS = 1.0  # after the flush, how long the main thread gets to exit before os._exit
MAX_CHECKPOINT_BYTES = 1 << 20
CHECKPOINT_FORMAT = 1
_SEQ_CONFLICTS = 10  # taken numbers in a row before save() gives up (each one skips past the highest)
_LOAD_ATTEMPTS = 4  # listings by load() while checkpoints vanish under it (another pod pruning)
_WAKE_SIGTERM = bytes([signal.SIGTERM])  # what set_wakeup_fd writes for SIGTERM; the handler writes it too
_WAKE_QUIT = b"q"  # close(): stop the flush thread

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


class _QuietInFlushThreads(logging.Filter):
    """Drops every record emitted in a thread that set ``quiet``: the SIGTERM flush threads.

    Added to handlers (``Handler.handle`` runs its filters *before* taking the handler's lock), so a flush
    thread never waits for a lock the interrupted main thread may hold."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(self.local, "quiet", False)


_QUIET = _QuietInFlushThreads()


def _quiet_every_handler() -> list[logging.Handler]:
    """Put ``_QUIET`` on every handler there is now (lock-free: list copies and appends under the GIL)."""
    loggers: list[logging.Logger] = [logging.root]
    loggers += [x for x in list(logging.Logger.manager.loggerDict.values()) if isinstance(x, logging.Logger)]
    handlers = {id(h): h for lg in loggers for h in list(lg.handlers)}
    if logging.lastResort is not None:
        handlers[id(logging.lastResort)] = logging.lastResort
    for handler in handlers.values():
        handler.addFilter(_QUIET)
    return list(handlers.values())


def _bounded(fn: Callable[[], object], timeout: float) -> None:
    """Run ``fn`` in a daemon thread and wait at most ``timeout`` for it (it may block on a lock)."""

    def run() -> None:
        _QUIET.local.quiet = True
        with suppress(BaseException):  # best effort: nothing to report it to
            fn()

    thread = threading.Thread(target=run, name="checkpoint-exit", daemon=True)
    thread.start()
    thread.join(timeout)


def _write_stderr_if_ready(text: str) -> None:
    """One line straight to fd 2, bypassing ``sys.stderr`` (whose lock the main thread may hold), and only
    if a write cannot block now (a pipe nobody reads must not keep the process alive)."""
    with suppress(OSError, ValueError):
        if select.select([], [2], [], 0)[1]:
            os.write(2, (text + "\n").encode()[:4096])  # ≤ PIPE_BUF: one atomic write


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


def _check_progress(progress: object) -> Progress | None:
    if progress is None:
        return None
    if isinstance(progress, bool) or not isinstance(progress, (int, float)):
        raise TypeError(f"progress must be a number, got {type(progress).__name__}")
    if not math.isfinite(progress):
        raise ValueError(f"progress must be finite, got {progress}")
    return progress


def _doc_progress(doc: Mapping[str, Any]) -> Progress | None:
    """A stored checkpoint's progress, or None (written before progress existed, or not a number)."""
    try:
        return _check_progress(doc.get("progress"))
    except (TypeError, ValueError):
        return None


class ShardAlreadyDone(SystemExit):
    """Raised by ``Shard.from_env`` when the shard is already marked done: the process ends with exit code 0
    (the index succeeds) without redoing the work. Catch it only to do something else first."""

    def __init__(self, shard_id: int, finished_at: str | None) -> None:
        super().__init__(0)
        self.shard_id, self.finished_at = shard_id, finished_at


class Shard:
    """One shard of an IndexedJob: its id, its checkpoints, how it resumes and how it stops on SIGTERM."""

    def __init__(
        self,
        shard_id: int,
        index: int,
        store: JsonStore,
        *,
        prefix: str,
        grace_seconds: float = 25.0,
        keep: int = 3,
        flush_store: JsonStore | None = None,
        skip_if_done: bool = True,
    ) -> None:
        """``flush_store`` (default ``store``) serves the SIGTERM flush; ``from_env`` gives it its own client
        so the flush never waits on a lock or connection the interrupted main thread holds."""
        naming.stale_seqs((), keep)  # validates keep
        self.shard_id, self.index, self.prefix = shard_id, index, prefix
        self.store, self.flush_store = store, flush_store or store
        self.grace_seconds, self.keep = grace_seconds, keep
        self.skip_if_done = skip_if_done
        self.resumed_seq: int | None = None
        # (state, progress) as one tuple: one attribute write, so the flush thread never sees half of it
        self._current: tuple[dict[str, Any] | None, Progress | None] = (None, None)
        self._lock = threading.Lock()  # the counters below; never taken by the signal handler
        self._seq = 0  # the highest checkpoint number known to be taken
        # checkpoints known to exist → (progress, ETag): what pruning ranks, and deletes only if unchanged
        self._known: dict[int, tuple[Progress | None, str | None]] = {}
        self._critical = 0
        # SIGTERM: plain attributes, each only ever set one way (no lost update between threads)
        self._sigterm_at: float | None = None  # monotonic time of the signal
        self._signalled = False  # the main thread stops at its next safe point
        self._gate_closed = False  # the flush has taken its snapshot of latest
        self._flush_done = False  # the flush has finished (written or not)
        self._parked = False  # the main thread waits at a safe point
        self._closing = False
        self._outcome_logged = False
        self.sigterm_seq: int | None = None  # the checkpoint the SIGTERM flush wrote
        self.sigterm_error: str | None = None  # why it wrote none
        self.sigterm_progress: Progress | None = None  # and its progress
        self.sigterm_seconds: float | None = None  # signal → flush finished
        self.sigterm_split_block = False  # a critical block outlasted the budget and was split
        self._flushed = threading.Event()
        self._previous_handler: Any = None
        self._own_wakeup_fd = False
        self._wake_r = self._wake_w = -1
        self._watcher: threading.Thread | None = None
        self._quieted: list[logging.Handler] = []
        self._installed = False
        self._hard_exit: Callable[[int], object] = os._exit  # tests replace it

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        handle_sigterm: bool = True,
        keep: int = 3,
        skip_if_done: bool = True,
    ) -> Shard:
        """The shard this pod runs, from the variables the operator injects (see :mod:`.env`).

        With ``skip_if_done`` (the default), a shard already marked done raises ``ShardAlreadyDone``: the
        process exits 0 without redoing it."""
        env = ShardEnv.from_environ(os.environ if environ is None else environ)
        if env.connection_string:
            endpoint = account_url_from_connection_string(env.connection_string)
            if endpoint.rstrip("/") != env.account_url.rstrip("/"):
                log.warning(
                    "%s points at %s, %s at %s: using the connection string's endpoint",
                    CONNECTION_STRING,
                    redact(endpoint),
                    CHECKPOINT_URL_ENV,
                    env.account_url,
                )
        store = _store(env, RetryPolicy())
        flush_store = _store(
            env, RetryPolicy(attempts=20, base_delay=0.2, max_delay=2.0, request_timeout=10.0)
        )
        shard = cls(
            env.shard_id,
            env.index,
            store,
            prefix=env.prefix,
            grace_seconds=env.grace_seconds,
            keep=keep,
            flush_store=flush_store,
            skip_if_done=skip_if_done,
        )
        if skip_if_done:
            shard.exit_if_done()
        if handle_sigterm:
            shard.handle_sigterm()
        return shard

    def exit_if_done(self) -> None:
        """Raise ``ShardAlreadyDone`` (exit code 0) when the shard's ``done.json`` exists."""
        done = self.done_record()
        if done is None:
            return
        finished_at = str(done.get("finished_at") or "") or None
        log.info(
            "shard %d (index %d) is already done (finished at %s, by an earlier pod or try); exiting "
            "without redoing it",
            self.shard_id,
            self.index,
            finished_at or "an unknown time",
        )
        self.close()
        raise ShardAlreadyDone(self.shard_id, finished_at)

    # -- state -----------------------------------------------------------------------------------------------

    @property
    def latest(self) -> dict[str, Any] | None:
        """The state a SIGTERM flushes: set it after every unit of work (``save`` sets it too).

        Assigning it keeps the current ``progress``; use :meth:`set_latest` to advance both."""
        return self._current[0]

    @latest.setter
    def latest(self, state: dict[str, Any] | None) -> None:
        self._current = (state, self._current[1])

    @property
    def progress(self) -> Progress | None:
        """The progress that goes with ``latest`` (None: not given yet, nor loaded)."""
        return self._current[1]

    def set_latest(self, state: Mapping[str, Any], progress: Progress | None = None) -> None:
        """Set what a SIGTERM flushes, with its progress (None: keep the current progress).

        Cheap (no I/O): call it after every unit of work, inside the ``critical()`` block that records it.
        The mapping is copied shallowly: replace nested values rather than mutate them afterwards."""
        checked = _check_progress(progress)
        self._current = (dict(state), self._current[1] if checked is None else checked)

    def load(self) -> dict[str, Any] | None:
        """The state of the checkpoint of highest progress (ties: highest sequence number), or None on a fresh
        start; ``latest`` and ``progress`` become it, and later saves continue the numbering.

        Reads newest first. A checkpoint listed but gone when read was pruned by another pod of this index,
        which therefore knew better ones: the folder is listed again (a few times at most), so a pod pruning
        meanwhile cannot make this one resume from less than the best there was."""
        folder = self._folder()
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
                found[seq] = (_doc_progress(doc), etag)
                if isinstance(doc.get("state"), dict):
                    loaded[seq] = doc
            if not vanished:
                break
        with self._lock:
            self._seq = max([self._seq, *listed])
            self._known.update(found)
        if not loaded:
            return None
        best = max(loaded, key=lambda s: naming.rank(_doc_progress(loaded[s]), s))
        doc = loaded[best]
        state: dict[str, Any] = doc["state"]
        self.resumed_seq = best
        self._current = (state, _doc_progress(doc))
        log.info(
            "shard %d resumes from checkpoint %d (%s, progress %s)",
            self.shard_id,
            best,
            doc.get("reason"),
            self._current[1],
        )
        self._prune()
        return state

    def save(self, state: Mapping[str, Any], progress: Progress | None = None) -> int | None:
        """Write ``state`` as the next checkpoint (one atomic upload), with ``progress`` (None: the current
        one), and prune to the ``keep`` of highest (progress, seq).

        Returns its number, or None when Blob Storage stayed unavailable: the state remains ``latest`` and
        goes out with the next save or the SIGTERM flush. Raises ValueError over MAX_CHECKPOINT_BYTES. After
        a SIGTERM (outside a critical block) it uploads nothing: it hands the state to the flush and raises
        ``SystemExit(143)`` once the flush is done.
        """
        checked = _check_progress(progress)
        current = (dict(state), self._current[1] if checked is None else checked)
        with self._lock:
            stop = self._signalled and not self._critical
            if not (stop and self._gate_closed):
                self._current = current
        if stop:
            self._stop_here()
        try:
            seq = self._write(current[0], current[1], "periodic", self.store, None, quiet=False)
        except BlobUnavailable as exc:
            log.warning("shard %d: checkpoint deferred: %s", self.shard_id, exc)
            return None
        self._prune()
        return seq

    def mark_done(self, output: Mapping[str, Any]) -> None:
        """Record that the shard finished, with a small JSON ``output`` (``done.json``). The first record
        is kept (another pod of the index may have finished first); with ``skip_if_done=False`` it is
        replaced."""
        doc = {
            "format": CHECKPOINT_FORMAT,
            "shard_id": self.shard_id,
            "index": self.index,
            "finished_at": _now(),
            "output": dict(output),
        }
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

    def _write(
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
            "saved_at": _now(),
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
            listed = [naming.checkpoint_seq(n) for n, _ in store.list_names(self._folder())]
        except BlobStoreError:
            listed = []
        gap = random.randrange(4 * attempt)
        with self._lock:
            self._seq = max([self._seq, *(s for s in listed if s)]) + gap

    def _prune(self) -> None:
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
                now = datetime.now(timezone.utc)
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

    def _folder(self) -> str:
        return naming.shard_folder(self.prefix, self.shard_id)

    # -- SIGTERM ---------------------------------------------------------------------------------------------

    @contextmanager
    def critical(self) -> Iterator[None]:
        """A block a SIGTERM must not split (e.g. "record item i" + "latest = next is i+1"): the flush runs
        when the block ends, within the same grace budget (see the module docstring for a block that
        outlasts it). After a SIGTERM a new block does not start: ``SystemExit(143)`` once the flush is
        done."""
        with self._lock:
            stop = self._signalled and not self._critical
            if not stop:
                self._critical += 1
        if stop:
            self._stop_here()
        try:
            yield
        finally:
            with self._lock:
                self._critical -= 1
                last = not self._critical
            if last and self._signalled:
                self._stop_here()

    def handle_sigterm(self) -> None:
        """Install the SIGTERM handler and start the flush thread (``from_env`` does); ``close()`` restores
        the previous handler and stops the thread. Call it from the main thread."""
        if self._installed:
            return
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)  # a flood of signals never blocks the handler
        try:
            self._previous_handler = signal.signal(signal.SIGTERM, self._on_sigterm)
        except BaseException:
            self._close_pipe()
            raise
        previous_fd = signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        self._own_wakeup_fd = previous_fd == -1
        if not self._own_wakeup_fd:  # someone's (an asyncio loop's): leave it; the handler's byte wakes us
            signal.set_wakeup_fd(previous_fd)
        self._closing = False
        self._watcher = threading.Thread(
            target=self._watch, args=(self._wake_r,), name="checkpoint-sigterm-flush", daemon=True
        )
        self._watcher.start()
        atexit.register(self._log_sigterm_outcome_at_exit)
        self._installed = True

    def flush(self, timeout: float) -> int | None:
        """Write ``latest`` now as one checkpoint within ``timeout`` seconds (what SIGTERM does).

        The upload runs in a daemon thread joined with the timeout, so a hung connection cannot hold the
        process past the grace period. Returns the checkpoint number, or None (nothing to write, too big,
        or failed).
        """
        state, progress = self._current
        if state is None or timeout <= 0:
            return None
        seq, error = self._upload(state, progress, time.monotonic() + timeout, quiet=False)
        if error is not None:
            log.error("shard %d: the flush %s", self.shard_id, error)
        return seq

    def close(self) -> None:
        """Restore the previous SIGTERM handler, stop the flush thread, close the store clients.

        After a SIGTERM it first waits for the flush (bounded by the grace period) and logs its outcome; the
        flush thread then still ends the process as described in the module docstring."""
        if self._installed:
            with self._lock:
                self._closing = True  # the flush thread no longer signals the main thread
            signal.signal(signal.SIGTERM, self._previous_handler)
            if self._own_wakeup_fd:
                current = signal.set_wakeup_fd(-1)
                if current != self._wake_w:  # replaced after us: put theirs back
                    signal.set_wakeup_fd(current)
            self._installed = False
            atexit.unregister(self._log_sigterm_outcome_at_exit)
            if self._signalled:
                self._flushed.wait(self.grace_seconds)
                self._log_sigterm_outcome()
            else:
                with suppress(OSError):
                    os.write(self._wake_w, _WAKE_QUIT)
                if self._watcher is not None:
                    # a SIGTERM that came just before the handler was restored is flushed first
                    self._watcher.join(self.grace_seconds)
                self._close_pipe()
            for handler in self._quieted:
                handler.removeFilter(_QUIET)
        for store in {id(self.store): self.store, id(self.flush_store): self.flush_store}.values():
            close = getattr(store, "close", None)
            if callable(close):
                close()

    def __enter__(self) -> Shard:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close; a block that ends normally after a SIGTERM still exits 143 (the pod was told to stop)."""
        self.close()
        if et is None and self._signalled:
            raise SystemExit(EXIT_SIGTERM)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        """The Python-level handler, run by the main thread between two bytecodes - possibly inside a
        logging call or any other lock holder: it takes no lock, logs nothing, does no I/O but one
        ``os.write``."""
        if self._flush_done:
            raise SystemExit(EXIT_SIGTERM)  # the flush is over: stop here (unwinds through finally blocks)
        if self._sigterm_at is None:
            self._sigterm_at = time.monotonic()
        self._signalled = True
        try:  # noqa: SIM105 - plain try: the least work a signal handler can do
            os.write(self._wake_w, _WAKE_SIGTERM)
        except OSError:  # the pipe is full (a wake-up is pending) or closed
            pass

    def _stop_here(self) -> NoReturn:
        """A safe point after a SIGTERM: wait for the flush, log its outcome, exit 143."""
        self._parked = True
        self._flushed.wait(self.grace_seconds)
        self._log_sigterm_outcome()
        raise SystemExit(EXIT_SIGTERM)

    def _watch(self, wake_r: int) -> None:
        """The flush thread: sleeps in ``os.read`` until a SIGTERM (or close()) writes to the pipe."""
        _QUIET.local.quiet = True
        while True:
            try:
                byte = os.read(wake_r, 1)
            except OSError:
                return
            if not byte or byte == _WAKE_QUIT:
                return
            if byte == _WAKE_SIGTERM:
                break  # other bytes: other signals through set_wakeup_fd
        woke = time.monotonic()
        t0 = self._sigterm_at
        if t0 is None or t0 > woke:  # the C-level wake-up came before the Python handler ran
            t0 = self._sigterm_at = woke
        self._signalled = True
        deadline = t0 + self.grace_seconds - FLUSH_MARGIN_SECONDS
        try:
            self._flush_on_sigterm(deadline)
        except BaseException as exc:  # never let the exit below be skipped
            self.sigterm_error = f"failed: {type(exc).__name__}: {redact(exc)}"
        finally:
            self.sigterm_seconds = time.monotonic() - t0
            self._flush_done = True
            self._flushed.set()
            self._stop_main_thread()
            exit_at = min(time.monotonic() + EXIT_WAIT_SECONDS, deadline + FLUSH_MARGIN_SECONDS / 2)
            time.sleep(max(0.0, exit_at - time.monotonic()))
            # still running: the main thread is stuck (or slow to exit); end the process from here
            _bounded(_flush_stdio, 0.3)
            if not self._outcome_logged:
                _write_stderr_if_ready(self._outcome_text())
            self._hard_exit(EXIT_SIGTERM)

    def _flush_on_sigterm(self, deadline: float) -> None:
        now = time.monotonic()
        snapshot_by = deadline - min(FLUSH_UPLOAD_SECONDS, max(0.0, deadline - now) / 2)
        while True:  # poll, with lock timeouts: nothing here may block on the main thread
            now = time.monotonic()
            late = now >= snapshot_by
            got = self._lock.acquire(timeout=0.05)
            try:
                if (got and not self._critical) or late:
                    self.sigterm_split_block = self._critical > 0
                    self._gate_closed = True
                    state, progress = self._current
                    self.sigterm_progress = progress
                    break
            finally:
                if got:
                    self._lock.release()
            time.sleep(0.002)
        self._quieted = _quiet_every_handler()
        if state is None:
            self.sigterm_error = "had nothing to write (no latest state yet)"
            return
        if time.monotonic() >= deadline:
            self.sigterm_error = "had no time left"
            return
        self.sigterm_seq, self.sigterm_error = self._upload(state, progress, deadline, quiet=True)

    def _upload(
        self, state: dict[str, Any], progress: Progress | None, deadline: float, *, quiet: bool
    ) -> tuple[int | None, str | None]:
        """Write one "sigterm" checkpoint through ``flush_store`` in a daemon thread, waiting for it until
        ``deadline``: ``(seq, None)`` or ``(None, why not)``. Logs nothing."""
        outcome: list[int | BaseException] = []

        def work() -> None:
            if quiet:
                _QUIET.local.quiet = True
            try:
                seq = self._write(state, progress, "sigterm", self.flush_store, deadline, quiet=quiet)
                outcome.append(seq)
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=work, name="checkpoint-flush", daemon=True)
        thread.start()
        thread.join(max(0.0, deadline - time.monotonic()) + 0.2)
        if not outcome:
            return None, "did not finish in time"
        if isinstance(outcome[0], BaseException):
            return None, f"failed: {redact(outcome[0])}"
        return outcome[0], None

    def _stop_main_thread(self) -> None:
        """Raise SystemExit(143) in the main thread through its handler, unless it waits at a safe point or
        is closing (then the handler may no longer be ours)."""
        if not self._lock.acquire(timeout=0.5):
            return
        try:
            if not (self._closing or self._parked):
                ident = threading.main_thread().ident
                if ident is not None:
                    signal.pthread_kill(ident, signal.SIGTERM)
        finally:
            self._lock.release()

    def _outcome_text(self) -> str:
        took = self.sigterm_seconds or 0.0
        split = " (a critical block outlasted the budget and was split)" if self.sigterm_split_block else ""
        if not self._flush_done:
            return f"shard {self.shard_id}: SIGTERM, the flush has not finished; exit {EXIT_SIGTERM}"
        if self.sigterm_seq is None:
            return (
                f"shard {self.shard_id}: SIGTERM, no checkpoint written: the flush {self.sigterm_error} "
                f"({took:.2f}s){split}; exit {EXIT_SIGTERM}"
            )
        return (
            f"shard {self.shard_id}: SIGTERM, checkpoint {self.sigterm_seq} (progress "
            f"{self.sigterm_progress}) written in {took:.2f}s{split}; exit {EXIT_SIGTERM}"
        )

    def _log_sigterm_outcome(self) -> None:
        """Main thread only (never while the flush runs in the handler's stead)."""
        if self._outcome_logged:
            return
        text = self._outcome_text()
        if self.sigterm_seq is None:
            log.error("%s", text)
        else:
            log.warning("%s", text)
        self._outcome_logged = True

    def _log_sigterm_outcome_at_exit(self) -> None:
        """The main thread's SystemExit can come from the handler outside any ``with shard:`` block."""
        if self._flush_done:
            self._log_sigterm_outcome()

    def _close_pipe(self) -> None:
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                with suppress(OSError):
                    os.close(fd)
        self._wake_r = self._wake_w = -1


def _store(env: ShardEnv, retry: RetryPolicy) -> BlobStore:
    """The SAS the operator gives the pod; else (local runs) a connection string; else the pod's identity."""
    if env.sas_token:
        return BlobStore.from_sas(env.account_url, env.container, env.sas_token, retry=retry)
    if env.connection_string:
        return BlobStore.from_connection_string(env.connection_string, env.container, retry=retry)
    return BlobStore.from_account_url(env.account_url, env.container, retry=retry)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
