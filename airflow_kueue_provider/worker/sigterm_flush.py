"""The SIGTERM flush of a shard: what fits the 30 s Spot eviction window (see ``shard`` for the whole story).

The handler only notes the time and writes one byte to a pipe (``sigterm_wakeup``), so the flush starts even
while the main thread is stuck in a C call. A daemon thread blocked on that pipe then waits for the open
``critical()`` blocks (bounded by the grace budget), closes the gate, uploads the latest state through
``write`` in a helper thread bounded by the deadline, stops the main thread with ``SystemExit(143)``, and
ends the process with ``os._exit(143)`` if the main thread does not exit in time (at the grace's end when the
main thread holds it there at a safe point, ``hold_exit``: a pack waiting for its rest). Neither thread logs
(``flush_threads``); the main thread logs what the flush did (``flush_outcome``).
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, NoReturn

from ..storage.blob_errors import redact
from .checkpoint_store import Progress
from .flush_outcome import FlushOutcome
from .flush_threads import (
    QUIET,
    flush_stdio,
    quiet_every_handler,
    run_bounded,
    upload_within,
    write_stderr_if_ready,
)
from .sigterm_wakeup import WakeupPipe

log = logging.getLogger("airflow_kueue_provider.worker")

EXIT_SIGTERM = 143  # 128 + SIGTERM, what a shell reports for a process killed by SIGTERM
FLUSH_MARGIN_SECONDS = 2.0  # of the grace period, kept for thread wake-up and process exit
FLUSH_UPLOAD_SECONDS = 5.0  # kept for the upload when a critical block outlasts the budget (<= half of it)
EXIT_WAIT_SECONDS = 1.0  # after the flush, how long the main thread gets to exit before os._exit

State = dict[str, Any]
Write = Callable[[State, "Progress | None", float, bool], int]
"""``write(state, progress, deadline, quiet)``: one "sigterm" checkpoint by ``deadline`` (monotonic)."""


class SigtermFlush:
    """The latest state of one shard (what a SIGTERM flushes), its critical blocks, and the flush itself.

    ``write`` uploads one checkpoint (the shard gives it its own store client, so the flush never waits on a
    lock or connection the interrupted main thread holds)."""

    def __init__(self, shard_id: int, grace_seconds: float, write: Write) -> None:
        self.shard_id, self.grace_seconds, self._write = shard_id, grace_seconds, write
        # (state, progress) as one tuple: one attribute write, so the flush thread never sees half of it
        self.current: tuple[State | None, Progress | None] = (None, None)
        self._lock = threading.Lock()  # the critical count and the gate; never taken by the signal handler
        self._critical = 0
        # plain attributes, each only ever set one way (no lost update between threads)
        self._sigterm_at: float | None = None  # monotonic time of the signal
        self.signalled = False  # the main thread stops at its next safe point
        self._gate_closed = False  # the flush has taken its snapshot of the state
        self._parked = False  # the main thread waits at a safe point
        self._closing = False
        self._outcome_logged = False
        self.outcome = FlushOutcome()  # what the flush did; its ``done`` says it has finished
        self._flushed = threading.Event()
        self._wakeup = WakeupPipe()
        self._watcher: threading.Thread | None = None
        self._quieted: list[logging.Handler] = []
        self._installed = False
        self._exit_held = threading.Event()  # the main thread waits inside the grace at a safe point
        self._hard_exit: Callable[[int], object] = os._exit  # tests replace it

    @property
    def seq(self) -> int | None:
        """The checkpoint the SIGTERM flush wrote."""
        return self.outcome.seq

    @property
    def error(self) -> str | None:
        """Why the SIGTERM flush wrote none."""
        return self.outcome.error

    @property
    def split_block(self) -> bool:
        """A critical block outlasted the budget and was split."""
        return self.outcome.split_block

    def stop_deadline(self) -> float | None:
        """After a SIGTERM: the monotonic time by which the process must be on its way out (the grace less
        ``FLUSH_MARGIN_SECONDS``); None before one."""
        t0 = self._sigterm_at
        return None if t0 is None else t0 + self.grace_seconds - FLUSH_MARGIN_SECONDS

    def hold_exit(self) -> None:
        """The main thread stopped at a safe point and waits there, within ``stop_deadline`` (a pack whose
        rest other pods of its Job are finishing, ``shard_pack``): the flush thread then ends the process only
        at the grace's end, not ``EXIT_WAIT_SECONDS`` after the flush."""
        self._exit_held.set()

    def offer(self, current: tuple[State, Progress | None]) -> None:
        """A save's state becomes the current one, unless a SIGTERM's flush already took its snapshot; after
        a SIGTERM outside a critical block, stop here (``SystemExit(143)`` once the flush is done)."""
        with self._lock:
            stop = self.signalled and not self._critical
            if not (stop and self._gate_closed):
                self.current = current
        if stop:
            self.stop_here()

    @contextmanager
    def critical(self) -> Iterator[None]:
        """A block a SIGTERM must not split (e.g. "record item i" + "latest = next is i+1"): the flush runs
        when the block ends, within the same grace budget (see the module docstring for a block that
        outlasts it). After a SIGTERM a new block does not start: ``SystemExit(143)`` once the flush is
        done."""
        with self._lock:
            stop = self.signalled and not self._critical
            if not stop:
                self._critical += 1
        if stop:
            self.stop_here()
        try:
            yield
        finally:
            with self._lock:
                self._critical -= 1
                last = not self._critical
            if last and self.signalled:
                self.stop_here()

    def install(self) -> None:
        """Install the SIGTERM handler and start the flush thread (``from_env`` does); ``close()`` restores
        the previous handler and stops the thread. Call it from the main thread."""
        if self._installed:
            return
        self._wakeup.install(self._on_sigterm)
        self._closing = False
        self._watcher = threading.Thread(
            target=self._watch, args=(self._wakeup.read_fd,), name="checkpoint-sigterm-flush", daemon=True
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
        state, progress = self.current
        if state is None or timeout <= 0:
            return None
        seq, error = self._upload(state, progress, time.monotonic() + timeout, quiet=False)
        if error is not None:
            log.error("shard %d: the flush %s", self.shard_id, error)
        return seq

    def close(self) -> None:
        """Restore the previous SIGTERM handler and stop the flush thread.

        After a SIGTERM it first waits for the flush (bounded by the grace period) and logs its outcome; the
        flush thread then still ends the process as described in the module docstring."""
        if self._installed:
            with self._lock:
                self._closing = True  # the flush thread no longer signals the main thread
            self._wakeup.restore()
            self._installed = False
            atexit.unregister(self._log_sigterm_outcome_at_exit)
            if self.signalled:
                self._flushed.wait(self.grace_seconds)
                self._log_sigterm_outcome()
            else:
                self._wakeup.quit()
                if self._watcher is not None:
                    # a SIGTERM that came just before the handler was restored is flushed first
                    self._watcher.join(self.grace_seconds)
                self._wakeup.close()
            for handler in self._quieted:
                handler.removeFilter(QUIET)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        """The Python-level handler, run by the main thread between two bytecodes - possibly inside a
        logging call or any other lock holder: it takes no lock, logs nothing, does no I/O but one
        ``os.write``."""
        if self.outcome.done:
            raise SystemExit(EXIT_SIGTERM)  # the flush is over: stop here (unwinds through finally blocks)
        if self._sigterm_at is None:
            self._sigterm_at = time.monotonic()
        self.signalled = True
        self._wakeup.wake()

    def stop_here(self) -> NoReturn:
        """A safe point after a SIGTERM: wait for the flush, log its outcome, exit 143."""
        self._parked = True
        self._flushed.wait(self.grace_seconds)
        self._log_sigterm_outcome()
        raise SystemExit(EXIT_SIGTERM)

    def _watch(self, wake_r: int) -> None:
        """The flush thread: sleeps in ``os.read`` until a SIGTERM (or close()) writes to the pipe."""
        QUIET.local.quiet = True
        if not WakeupPipe.wait_for_sigterm(wake_r):
            return
        woke = time.monotonic()
        t0 = self._sigterm_at
        if t0 is None or t0 > woke:  # the C-level wake-up came before the Python handler ran
            t0 = self._sigterm_at = woke
        self.signalled = True
        deadline = t0 + self.grace_seconds - FLUSH_MARGIN_SECONDS
        try:
            self._flush_on_sigterm(deadline)
        except BaseException as exc:  # never let the exit below be skipped
            self.outcome.error = f"failed: {type(exc).__name__}: {redact(exc)}"
        finally:
            self.outcome.seconds = time.monotonic() - t0
            self.outcome.done = True
            self._flushed.set()
            self._stop_main_thread()
            exit_at = min(time.monotonic() + EXIT_WAIT_SECONDS, deadline + FLUSH_MARGIN_SECONDS / 2)
            if self._exit_held.wait(max(0.0, exit_at - time.monotonic())):
                time.sleep(max(0.0, deadline + FLUSH_MARGIN_SECONDS / 2 - time.monotonic()))
            # still running: the main thread is stuck (or slow to exit); end the process from here
            run_bounded(flush_stdio, 0.3)
            if not self._outcome_logged:
                write_stderr_if_ready(self._outcome_text())
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
                    self.outcome.split_block = self._critical > 0
                    self._gate_closed = True
                    state, progress = self.current
                    self.outcome.progress = progress
                    break
            finally:
                if got:
                    self._lock.release()
            time.sleep(0.002)
        self._quieted = quiet_every_handler()
        if state is None:
            self.outcome.error = "had nothing to write (no latest state yet)"
            return
        if time.monotonic() >= deadline:
            self.outcome.error = "had no time left"
            return
        self.outcome.seq, self.outcome.error = self._upload(state, progress, deadline, quiet=True)

    def _upload(
        self, state: State, progress: Progress | None, deadline: float, *, quiet: bool
    ) -> tuple[int | None, str | None]:
        """One "sigterm" checkpoint through ``write`` by ``deadline``: ``(seq, None)`` or ``(None, why)``."""
        return upload_within(lambda: self._write(state, progress, deadline, quiet), deadline, quiet=quiet)

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
        return f"shard {self.shard_id}: SIGTERM, {self.outcome.describe()}; exit {EXIT_SIGTERM}"

    def _log_sigterm_outcome(self) -> None:
        """Main thread only (never while the flush runs in the handler's stead)."""
        if self._outcome_logged:
            return
        text = self._outcome_text()
        if self.outcome.seq is None:
            log.error("%s", text)
        else:
            log.warning("%s", text)
        self._outcome_logged = True

    def _log_sigterm_outcome_at_exit(self) -> None:
        """The main thread's SystemExit can come from the handler outside any ``with shard:`` block."""
        if self.outcome.done:
            self._log_sigterm_outcome()
