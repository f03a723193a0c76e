"""A shard of an Indexed Job as its program sees it: its checkpoints in Blob Storage (``checkpoint_store``)
and the SIGTERM flush that fits the 30 s Spot eviction window (``sigterm_flush``).

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

import logging
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from ..storage.blob_errors import BlobUnavailable
from .checkpoint_store import (
    MAX_CHECKPOINT_BYTES,
    CheckpointStore,
    JsonStore,
    Progress,
    check_progress,
)
from .done_writes import DoneWrites
from .env import ShardEnv
from .shard_items import NoShardItem, ShardItems
from .shard_pack import ShardEnding, ShardPack
from .sigterm_flush import EXIT_SIGTERM, SigtermFlush, State
from .stores import close_stores, stores_for

__all__ = [
    "EXIT_SIGTERM",
    "MAX_CHECKPOINT_BYTES",
    "JsonStore",
    "NoShardItem",
    "Progress",
    "Shard",
    "ShardAlreadyDone",
]

log = logging.getLogger("airflow_kueue_provider.worker")


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
        ending: ShardEnding | None = None,
        owns_stores: bool = True,
        items: ShardItems | None = None,
        done_writes: DoneWrites | None = None,
    ) -> None:
        """``flush_store`` (default ``store``) serves the SIGTERM flush; ``from_env`` gives it its own client
        so the flush never waits on a lock or connection the interrupted main thread holds. A pack's shards
        share their stores (``owns_stores=False``: ``close`` leaves them open), ``ending``, ``items`` (read
        by ``item``) and ``done_writes`` (``mark_done`` hands its write there: written behind)."""
        self.checkpoints = CheckpointStore(
            shard_id, index, store, prefix=prefix, keep=keep, skip_if_done=skip_if_done, writes=done_writes
        )
        self.shard_id, self.index, self.prefix = shard_id, index, prefix
        self.store, self.flush_store = store, flush_store or store
        self.grace_seconds, self.keep, self.skip_if_done = grace_seconds, keep, skip_if_done
        self.resumed_seq: int | None = None
        self.sigterm = SigtermFlush(shard_id, grace_seconds, self._flush_write)
        self.ending, self.owns_stores = ending or ShardEnding(), owns_stores
        self.items = items
        self.marked_done = False
        """Whether this process wrote (or found) the done marker through ``mark_done``."""
        self.started = time.monotonic()
        """When this process took up the shard (a pack makes each shard as it reaches it): ``mark_done``
        records the seconds since as ``run_seconds``, what the shard history learns lengths from."""

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
        if env.packed:
            raise ValueError(
                f"this pod runs shards {list(env.shard_ids)} (up to {env.per_pod} per pod): "
                "loop over them with `for shard in Shard.each_from_env(): with shard: ...`, or run the "
                "task without shards_per_pod/expected_shard_duration"
            )
        store, flush_store = stores_for(env)
        shard = cls(
            env.shard_id,
            env.index,
            store,
            prefix=env.prefix,
            grace_seconds=env.grace_seconds,
            keep=keep,
            flush_store=flush_store,
            skip_if_done=skip_if_done,
            items=ShardItems.for_env(env),
        )
        if skip_if_done:
            shard.exit_if_done()
        if handle_sigterm:
            shard.handle_sigterm()
        return shard

    @classmethod
    def each_from_env(
        cls, environ: Mapping[str, str] | None = None, *, handle_sigterm: bool = True, keep: int = 3,
        take_over: bool = True,
    ) -> Iterator[Shard]:  # fmt: skip
        """Every shard this pod runs that is not done yet, one after the other (``shard_pack``): one in an
        unpacked Job, up to ``shards_per_pod`` in a packed one; with ``take_over``, then the shards stopped
        pods of the Job left (``pack_handoff``). Use each as ``with shard:``; an exception in the block is
        logged and the loop goes on, and the process then exits 1 naming the failed shards (``ShardsFailed``),
        so the index is retried and its pod redoes only those."""
        env = ShardEnv.from_environ(os.environ if environ is None else environ)
        return ShardPack(cls, env, handle_sigterm=handle_sigterm, keep=keep, take_over=take_over).shards()

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

    @property
    def item(self) -> Any:
        """This shard's input: item ``shard_id`` of the task's ``shard_items=`` (a JSON value; read once from
        the environment or the staged blob). ``NoShardItem`` when the task gave none."""
        if self.items is None:
            raise NoShardItem(
                f"shard {self.shard_id} has no item: the task sets no shard_items= (the shard id alone is "
                "its input)"
            )
        return self.items.item(self.shard_id, self.store)

    # -- state -----------------------------------------------------------------------------------------------

    @property
    def latest(self) -> dict[str, Any] | None:
        """The state a SIGTERM flushes: set it after every unit of work (``save`` sets it too).

        Assigning it keeps the current ``progress``; use :meth:`set_latest` to advance both."""
        return self.sigterm.current[0]

    @latest.setter
    def latest(self, state: dict[str, Any] | None) -> None:
        self.sigterm.current = (state, self.sigterm.current[1])

    @property
    def progress(self) -> Progress | None:
        """The progress that goes with ``latest`` (None: not given yet, nor loaded)."""
        return self.sigterm.current[1]

    def set_latest(self, state: Mapping[str, Any], progress: Progress | None = None) -> None:
        """Set what a SIGTERM flushes, with its progress (None: keep the current progress).

        Cheap (no I/O): call it after every unit of work, inside the ``critical()`` block that records it.
        The mapping is copied shallowly: replace nested values rather than mutate them afterwards."""
        checked = check_progress(progress)
        self.sigterm.current = (dict(state), self.progress if checked is None else checked)

    def load(self) -> dict[str, Any] | None:
        """The state of the checkpoint of highest progress (ties: highest sequence number), or None on a fresh
        start; ``latest`` and ``progress`` become it, and later saves continue the numbering."""
        found = self.checkpoints.load()
        if found is None:
            return None
        self.resumed_seq, state, progress = found
        self.sigterm.current = (state, progress)
        return state

    def save(self, state: Mapping[str, Any], progress: Progress | None = None) -> int | None:
        """Write ``state`` as the next checkpoint (one atomic upload), with ``progress`` (None: the current
        one), and prune to the ``keep`` of highest (progress, seq).

        Returns its number, or None when Blob Storage stayed unavailable: the state remains ``latest`` and
        goes out with the next save or the SIGTERM flush. Raises ValueError over MAX_CHECKPOINT_BYTES. After
        a SIGTERM (outside a critical block) it uploads nothing: it hands the state to the flush and raises
        ``SystemExit(143)`` once the flush is done.
        """
        checked = check_progress(progress)
        current = (dict(state), self.progress if checked is None else checked)
        self.sigterm.offer(current)
        try:
            seq = self.checkpoints.write(current[0], current[1], "periodic", self.store, None, quiet=False)
        except BlobUnavailable as exc:
            log.warning("shard %d: checkpoint deferred: %s", self.shard_id, exc)
            return None
        self.checkpoints.prune()
        return seq

    def mark_done(self, output: Mapping[str, Any]) -> None:
        """Record that the shard finished, with a small JSON ``output`` (``done.json``). The first record
        is kept (another pod of the index may have finished first); with ``skip_if_done=False`` it is
        replaced. The record also says how long this process ran the shard (``run_seconds``) and, when it
        resumed from a checkpoint, ``resumed`` (those seconds are then only the tail)."""
        run_seconds = time.monotonic() - self.started
        self.checkpoints.mark_done(output, run_seconds=run_seconds, resumed=self.resumed_seq is not None)
        self.marked_done = True

    def done_record(self) -> dict[str, Any] | None:
        """The shard's ``done.json``, or None while it is not done."""
        return self.checkpoints.done_record()

    def is_done(self) -> bool:
        return self.done_record() is not None

    # -- SIGTERM ---------------------------------------------------------------------------------------------

    @contextmanager
    def critical(self) -> Iterator[None]:
        """A block a SIGTERM must not split (e.g. "record item i" + "latest = next is i+1"): the flush runs
        when the block ends, within the same grace budget (see the module docstring for a block that
        outlasts it). After a SIGTERM a new block does not start: ``SystemExit(143)`` once the flush is
        done."""
        with self.sigterm.critical():
            yield

    def handle_sigterm(self) -> None:
        """Install the SIGTERM handler and start the flush thread (``from_env`` does); ``close()`` restores
        the previous handler and stops the thread. Call it from the main thread."""
        self.sigterm.install()

    def flush(self, timeout: float) -> int | None:
        """Write ``latest`` now as one checkpoint within ``timeout`` seconds (what SIGTERM does): in a daemon
        thread joined with the timeout, so a hung connection cannot hold the process past the grace period.
        Returns the checkpoint number, or None (nothing to write, too big, or failed)."""
        return self.sigterm.flush(timeout)

    def close(self) -> None:
        """Restore the previous SIGTERM handler, stop the flush thread, close the store clients.

        After a SIGTERM it first waits for the flush (bounded by the grace period) and logs its outcome; the
        flush thread then still ends the process as described in the module docstring."""
        self.sigterm.close()
        if self.owns_stores:
            close_stores(self.store, self.flush_store)

    def __enter__(self) -> Shard:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> bool:
        """Close; a block that ends normally after a SIGTERM still exits 143 (the pod was told to stop). An
        exception goes to ``ending``, which may suppress it (a pack goes on; a SystemExit, ``stopped``)."""
        self.close()
        if et is None and self.sigterm.signalled:
            raise SystemExit(EXIT_SIGTERM)
        if ev is None or isinstance(ev, Exception):
            return self.ending.ended(self, ev)
        return self.ending.stopped(self, ev)

    # what the SIGTERM flush did (None/False until it ran)
    @property
    def sigterm_seq(self) -> int | None:
        return self.sigterm.seq

    @property
    def sigterm_error(self) -> str | None:
        return self.sigterm.error

    @property
    def sigterm_split_block(self) -> bool:
        return self.sigterm.split_block

    def _flush_write(self, state: State, progress: Progress | None, deadline: float, quiet: bool) -> int:
        return self.checkpoints.write(state, progress, "sigterm", self.flush_store, deadline, quiet=quiet)
