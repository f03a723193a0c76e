"""Several shards in one pod, one after the other: the loop behind ``Shard.each_from_env()``.

Typical use (``example_dags/shard_programs/monte_carlo_pricer.py``)::

    for shard in Shard.each_from_env():
        with shard:                           # SIGTERM flushes this shard's latest state, as before
            state = shard.load() or {"next": 0}
            ...                               # the single-shard form's body, unchanged
            shard.mark_done(output)

Per shard, as in the single-shard form: its checkpoints, ``load`` resuming from the most progressed one,
``done.json`` (a shard already done is skipped, so a retried or replacement pod of the index redoes only the
rest), the SIGTERM flush of the shard in progress (the process then exits 143 and the next pod of the index
resumes it). What a pack adds: an exception in one shard's block is logged and the loop goes on with the next
shard; so is a block that ends without ``mark_done``. When the loop ends, any such shard makes the process
exit 1 (``ShardsFailed``, naming them): Kubernetes retries the index and its new pod runs only those.

The shards share one pair of Blob clients (a new TLS connection per one-second shard would cost a tenth of
it). Between two shards a SIGTERM only sets a flag: the loop exits 143 before it starts the next one.

With the hand-off (``take_over``, ``pack_handoff``) a stopped pack releases its rest to the Job's other pods
and waits inside its grace for their done records: if they come, the loop ends and the pod exits 0 (the
statements after ``with shard:`` in the loop body run once more first: the SIGTERM's ``SystemExit`` leaves
the block to the loop); if not, the process exits 143 as before.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, Generic, Protocol, TypeVar

from .checkpoint_store import JsonStore
from .done_lookahead import DoneLookahead
from .done_writes import DRAIN_ON_EXIT_SECONDS, DoneWrites
from .env import ShardEnv
from .pack_handoff import BlobHandOff, NoHandOff
from .shard_items import ShardItems
from .sigterm_flush import EXIT_SIGTERM, FLUSH_MARGIN_SECONDS, SigtermFlush
from .stores import close_stores, stores_for

log = logging.getLogger("airflow_kueue_provider.worker")


class ShardsFailed(SystemExit):
    """The pack ended with shards that failed (or ended without ``mark_done``): exit code 1, so the index is
    retried; the others are done and are not run again."""

    def __init__(self, index: int, failed: dict[int, str]) -> None:
        super().__init__(1)
        self.index, self.failed = index, dict(failed)

    def __str__(self) -> str:
        listed = "; ".join(f"shard {sid}: {why}" for sid, why in sorted(self.failed.items()))
        return f"index {self.index}: {len(self.failed)} shard(s) failed ({listed})"


class PackMember(Protocol):
    """What the pack needs of a shard (``Shard`` is one)."""

    shard_id: int
    index: int
    marked_done: bool
    sigterm: SigtermFlush

    def is_done(self) -> bool: ...
    def handle_sigterm(self) -> None: ...
    def close(self) -> None: ...


class ShardEnding:
    """What happens when a ``with shard:`` block ends (``ShardPack`` records a pack's failures instead): by
    default, an exception ends the program, as in any Python program."""

    def ended(self, shard: PackMember, error: BaseException | None) -> bool:
        """Called with the block's exception (None: it ended normally); True suppresses it."""
        return False

    def stopped(self, shard: PackMember, stop: BaseException) -> bool:
        """Called with a ``SystemExit`` (or another non-``Exception``) leaving the block; True suppresses
        it: the caller then stops the program itself."""
        return False


S = TypeVar("S", bound=PackMember)
MakeShard = Callable[..., S]
"""``Shard``'s constructor: ``(shard_id, index, store, *, prefix, grace_seconds, keep, flush_store, ending,
owns_stores, items, done_writes)``."""


class ShardPack(ShardEnding, Generic[S]):
    """The shards of one pod (``env.shard_ids``), run in order; it is also each shard's ``ending``."""

    def __init__(
        self,
        shard_type: MakeShard[S],
        env: ShardEnv,
        *,
        handle_sigterm: bool = True,
        keep: int = 3,
        stores: tuple[JsonStore, JsonStore] | None = None,
        take_over: bool = True,
    ) -> None:
        """``stores``: (store, flush store) to use instead of the ones ``env`` names (tests);
        ``take_over``: hand a stopped pack's rest to the Job's running pods (``pack_handoff``)."""
        self.shard_type, self.env, self.keep, self.take_over = shard_type, env, keep, take_over
        self.handle_sigterm, self._stores = handle_sigterm, stores
        self.failed: dict[int, str] = {}
        self.ran: list[int] = []
        self.done_before: list[int] = []
        self.taken_over: list[int] = []
        """Shards of stopped pods of the Job this pod took over (``pack_handoff``)."""
        self._ended: set[int] = set()
        self._finished: set[int] = set()  # own shards marked done here
        self._stop = threading.Event()
        self._stop_deadline: float | None = None  # monotonic: the stop's grace end, less the flush margin
        self.finished_elsewhere: list[int] = []
        """After a stop: the shards of its pack the Job's other pods finished within its grace (exit 0)."""
        self._writes = DoneWrites()
        self.items = ShardItems.for_env(env)
        """``shard_items=``: one reader for the pod, so a pack's shards share the staged chunk it read."""

    # -- ShardEnding --

    def ended(self, shard: PackMember, error: BaseException | None) -> bool:
        self._ended.add(shard.shard_id)
        if shard.shard_id in self.taken_over and (error is not None or not shard.marked_done):
            log.error(
                "shard %d, taken over by index %d, failed; its own index runs it",
                shard.shard_id,
                shard.index,
                exc_info=error,
            )
            return error is not None
        if error is not None:
            log.error(
                "shard %d (index %d) failed; going on with the pod's other shards",
                shard.shard_id,
                shard.index,
                exc_info=error,
            )
            self.failed[shard.shard_id] = f"{type(error).__name__}: {error}"
            return True
        if not shard.marked_done:
            log.error(
                "shard %d (index %d) ended without mark_done: it counts as failed and runs again",
                shard.shard_id,
                shard.index,
            )
            self.failed[shard.shard_id] = "ended without mark_done"
        return False

    def stopped(self, shard: PackMember, stop: BaseException) -> bool:
        """The SIGTERM's ``SystemExit(143)`` leaving a shard's block, in a pack that hands its rest over: the
        loop takes it (``shards`` raises it again, or ends the pod with exit 0 when the Job's other pods
        finish the rest within the grace), with the flush thread's hard exit held until the grace's end."""
        stopping = isinstance(stop, SystemExit) and stop.code == EXIT_SIGTERM and shard.sigterm.signalled
        if not (stopping and self.take_over and self.handle_sigterm):
            return False
        self._ended.add(shard.shard_id)  # stopped, not failed: its checkpoint is flushed, its claim released
        self._stop_deadline = shard.sigterm.stop_deadline()
        shard.sigterm.hold_exit()
        return True

    # -- the loop --

    def shards(self) -> Iterator[S]:
        """Yield every shard of the pod not done yet, then the shards it takes over from stopped pods of
        its Job (``pack_handoff``); raise ``ShardsFailed`` at the end if any of its own failed.

        Each shard's done marker is read while the shard before it runs (``DoneLookahead``) and written
        while the shard after it runs (``DoneWrites``): no Blob round trip is left between two shards. The
        pod waits for the writes before it ends; a marker not written makes its shard count as failed."""
        store, flush_store = self._stores or stores_for(self.env)
        previous = self._catch_sigterm_between_shards()
        own = list(self.env.shard_ids)
        lookahead = DoneLookahead(store, self.env.prefix, own)
        hand_off = self._hand_off_for(store)
        self._writes, drained, waiting, let_go = DoneWrites(), False, [], False
        try:
            released = hand_off.released_here(own)
            for shard_id in own:
                self._exit_if_told_to_stop()
                if lookahead.done(shard_id):
                    log.info("shard %d (index %d) is already done; skipping it", shard_id, self.env.index)
                    self.done_before.append(shard_id)
                    continue
                if shard_id in released and not hand_off.claim(shard_id):
                    waiting.append(shard_id)  # another pod took it over: waited for at the end
                    continue
                yield from self._run(shard_id, store, flush_store, hand_off)
            while not (self.failed or self._stop.is_set()) and (taken := hand_off.take_over(own)) is not None:
                log.info("index %d: taking over shard %d, released by a stopped pod", self.env.index, taken)
                self.taken_over.append(taken)
                yield from self._run(taken, store, flush_store, hand_off)
            for shard_id in waiting:
                if hand_off.wait_or_claim(shard_id, self._stop):
                    yield from self._run(shard_id, store, flush_store, hand_off)
                self._exit_if_told_to_stop()
            drained = True
            for shard_id, why in sorted(self._writes.drain().items()):
                log.error("shard %d (index %d): %s; it runs again", shard_id, self.env.index, why)
                if shard_id not in self.taken_over:
                    self.failed[shard_id] = why
        except SystemExit as stop:
            if not (stop.code == EXIT_SIGTERM and self._stop.is_set()):
                raise
            rest, let_go, drained = self._release(hand_off, own), True, True
            if self._drain_on_stop() or not hand_off.finished_elsewhere(rest, self._deadline()):
                raise
            self.finished_elsewhere = rest
            self.failed = {}  # an own shard that failed here was among the rest, and is done now
            log.info(
                "index %d: told to stop; the %d shard(s) it left (%s) were finished by other pods of its Job "
                "within its grace: exiting 0, its index done",
                self.env.index, len(rest), ",".join(map(str, rest)),
            )  # fmt: skip
        finally:
            if self._stop.is_set() and not let_go:  # first: one short write, inside the grace
                self._release(hand_off, own)
            if not drained:  # ended early: the markers written by then count, the others run again
                self._drain_on_stop()
            hand_off.close()
            lookahead.close()
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
            if self._stores is None:
                close_stores(store, flush_store)
        log.info(
            "index %d: ran %d shard(s), %d done before, %d taken over, %d failed",
            self.env.index,
            len(self.ran),
            len(self.done_before),
            len(self.taken_over),
            len(self.failed),
        )
        if self.failed:
            raise ShardsFailed(self.env.index, self.failed)

    def _release(self, hand_off: NoHandOff, own: list[int]) -> list[int]:
        """Told to stop: the pack's shards not finished here go on record for the Job's other pods."""
        finished = self._finished.union(self.done_before)
        rest = [s for s in own if s not in finished]
        hand_off.release(rest)
        return rest

    def _drain_on_stop(self) -> bool:
        """The done markers written by now count, the others run again; whether any was not written."""
        return bool(self._writes.drain(min(DRAIN_ON_EXIT_SECONDS, self.env.grace_seconds / 2)))

    def _deadline(self) -> float:
        """When a stopped pod must stop waiting for its rest: the flush's grace end, or for a SIGTERM
        between shards the grace from when the loop saw it."""
        if self._stop_deadline is None:
            self._stop_deadline = time.monotonic() + self.env.grace_seconds - FLUSH_MARGIN_SECONDS
        return self._stop_deadline

    def _run(
        self, shard_id: int, store: JsonStore, flush_store: JsonStore, hand_off: NoHandOff
    ) -> Iterator[S]:
        """One shard: made, yielded to the program's block, closed; a SIGTERM in it stops the pack."""
        shard = self._shard(shard_id, store, flush_store)
        if self._stop.is_set():  # a SIGTERM since the claim: the shard goes back
            hand_off.finished(shard_id, done=False)
            self._exit_if_told_to_stop()
        if self.handle_sigterm:
            shard.handle_sigterm()
        self.ran.append(shard_id)
        try:
            yield shard
        finally:
            shard.close()  # again if the block did (idempotent); once if the program used no block
            if shard.sigterm.signalled:
                self._stop.set()
            if shard.marked_done:
                self._finished.add(shard_id)
            hand_off.finished(shard_id, done=shard.marked_done)
            if shard_id in self.taken_over and not shard.marked_done:
                hand_off.gave_up(shard_id)
        if shard.shard_id not in self._ended:
            self.ended(shard, None)
        if shard.sigterm.signalled:
            raise SystemExit(EXIT_SIGTERM)

    def _hand_off_for(self, store: JsonStore) -> NoHandOff:
        if not self.take_over:
            return NoHandOff()
        env = self.env
        return BlobHandOff(store, env.prefix, env.layout, env.index, job_shards=env.job_shards)

    def _shard(self, shard_id: int, store: JsonStore, flush_store: JsonStore) -> S:
        return self.shard_type(
            shard_id,
            self.env.index,
            store,
            prefix=self.env.prefix,
            grace_seconds=self.env.grace_seconds,
            keep=self.keep,
            flush_store=flush_store,
            ending=self,
            owns_stores=False,
            items=self.items,
            done_writes=self._writes,
        )

    def _catch_sigterm_between_shards(self) -> Any:
        """Between shards a SIGTERM only sets a flag (each shard's own handler replaces this one while it
        runs); the previous handler is returned, to be put back."""
        if not self.handle_sigterm or threading.current_thread() is not threading.main_thread():
            return None

        def note(signum: int, frame: FrameType | None) -> None:
            if self._stop_deadline is None:
                self._stop_deadline = time.monotonic() + self.env.grace_seconds - FLUSH_MARGIN_SECONDS
            self._stop.set()

        return signal.signal(signal.SIGTERM, note)

    def _exit_if_told_to_stop(self) -> None:
        if self._stop.is_set():
            log.info("index %d: SIGTERM between shards; exiting before the next one", self.env.index)
            raise SystemExit(EXIT_SIGTERM)
