"""The threads of a SIGTERM flush, which must never wait for the interrupted main thread: their logging is
dropped before any handler's lock, their calls are bounded in time, and their one line goes straight to fd 2.

The main thread may have been stopped inside a logging call, a ``sys.stderr`` write or a Blob request,
holding its lock; anything here that could wait for such a lock would eat the grace period.
"""

from __future__ import annotations

import logging
import os
import select
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress

from ..storage.blob_errors import redact


class _QuietInFlushThreads(logging.Filter):
    """Drops every record emitted in a thread that set ``quiet``: the SIGTERM flush threads.

    Added to handlers (``Handler.handle`` runs its filters *before* taking the handler's lock), so a flush
    thread never waits for a lock the interrupted main thread may hold."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(self.local, "quiet", False)


QUIET = _QuietInFlushThreads()
"""The one filter: a flush thread sets ``QUIET.local.quiet = True``; ``quiet_every_handler`` installs it."""


def quiet_every_handler() -> list[logging.Handler]:
    """Put ``QUIET`` on every handler there is now (lock-free: list copies and appends under the GIL)."""
    loggers: list[logging.Logger] = [logging.root]
    loggers += [x for x in list(logging.Logger.manager.loggerDict.values()) if isinstance(x, logging.Logger)]
    handlers = {id(h): h for lg in loggers for h in list(lg.handlers)}
    if logging.lastResort is not None:
        handlers[id(logging.lastResort)] = logging.lastResort
    for handler in handlers.values():
        handler.addFilter(QUIET)
    return list(handlers.values())


def run_bounded(fn: Callable[[], object], timeout: float) -> None:
    """Run ``fn`` in a quiet daemon thread and wait at most ``timeout`` for it (it may block on a lock)."""

    def run() -> None:
        QUIET.local.quiet = True
        with suppress(BaseException):  # best effort: nothing to report it to
            fn()

    thread = threading.Thread(target=run, name="checkpoint-exit", daemon=True)
    thread.start()
    thread.join(timeout)


def write_stderr_if_ready(text: str) -> None:
    """One line straight to fd 2, bypassing ``sys.stderr`` (whose lock the main thread may hold), and only
    if a write cannot block now (a pipe nobody reads must not keep the process alive)."""
    with suppress(OSError, ValueError):
        if select.select([], [2], [], 0)[1]:
            os.write(2, (text + "\n").encode()[:4096])  # ≤ PIPE_BUF: one atomic write


def flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


def upload_within(write: Callable[[], int], deadline: float, *, quiet: bool) -> tuple[int | None, str | None]:
    """Run ``write`` (one checkpoint upload) in a daemon thread, waiting for it until ``deadline``
    (monotonic): ``(seq, None)`` or ``(None, why not)``, so a hung connection cannot hold the process past
    the grace period. Logs nothing; ``quiet`` also drops what ``write`` logs."""
    outcome: list[int | BaseException] = []

    def work() -> None:
        if quiet:
            QUIET.local.quiet = True
        try:
            outcome.append(write())
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
