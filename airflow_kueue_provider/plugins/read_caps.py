"""Caps on the Kueue pages' reads (pages, task JSON, log tails), and the threads that run them.

A sync FastAPI route runs in anyio's thread pool: 40 tokens per API server process, shared with Airflow's
own sync routes (``/api/v2/monitor/health`` among them). Sixty log tails of one user, each waiting seconds on
a slow cluster, held every token and health answered only when one came back. So the read routes are async:
each read takes a slot of its user and of the process (``[kueue] ui_reads_per_user``, ``ui_reads_total``;
beyond, 429 with ``Retry-After``) and runs in this module's own pool of ``ui_reads_total`` threads, never in
the shared one. A slot is given back when its read's thread is done (also when the request was cancelled or
the read raised), so the pool never queues more than it runs. The per-user counts keep only users with a
read running: at most ``ui_reads_total`` entries.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ..hooks.kueue_options import OPTIONS, option_count
from ..kueue.errors import KueueProviderError
from .user_slots import UserSlots, Wording

T = TypeVar("T")

RETRY_AFTER_SECONDS = 2
"""What a refused read's ``Retry-After`` asks: a page read takes about a second on a healthy cluster."""
DEFAULT_PER_USER = int(OPTIONS["ui_reads_per_user"].default)
DEFAULT_TOTAL = int(OPTIONS["ui_reads_total"].default)


class TooManyReads(KueueProviderError):
    """A new read would pass ``[kueue] ui_reads_per_user`` or ``ui_reads_total``."""


class ReadCaps:
    """Slots per user and in this API server process (``UserSlots``), and the pool of threads the reads run
    in."""

    def __init__(self, per_user: int, total: int) -> None:
        wording = Wording("Kueue page reads", "running", "wait for them", "try again shortly", TooManyReads)
        self.slots = UserSlots(per_user, total, ("ui_reads_per_user", "ui_reads_total"), wording)
        self.per_user, self.total = per_user, total
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    @property
    def running_total(self) -> int:
        return self.slots.taken_total

    def running_for(self, user: str) -> int:
        return self.slots.taken(user)

    @property
    def users(self) -> int:
        """Users with a read running (the size of the per-user map)."""
        return self.slots.users

    def acquire(self, user: str) -> Callable[[], None]:
        """Take a slot of ``user`` and return its release (idempotent, from any thread), or raise
        ``TooManyReads`` saying how many run and which option raises the cap."""
        return self.slots.acquire(user)

    def pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.total, thread_name_prefix="kueue-ui-read")
            return self._pool

    async def run(self, user: str, read: Callable[..., T], *args: Any) -> T:
        """``read(*args)`` in a slot of ``user``, in the plugin's threads; ``TooManyReads`` without a slot."""
        release = self.acquire(user)
        try:
            context = contextvars.copy_context()  # as Starlette's run_in_threadpool: the request's context
            future: Future[T] = self.pool().submit(context.run, read, *args)
        except BaseException:
            release()
            raise
        future.add_done_callback(lambda _: release())  # done, raised, or cancelled before it started
        return await asyncio.wrap_future(future)


def configured_read_caps() -> ReadCaps:
    """The caps from ``[kueue] ui_reads_per_user`` and ``ui_reads_total`` through the typed reader (the
    config file and the environment at exec): a bad value fails the first read naming the option."""
    return ReadCaps(per_user=option_count("ui_reads_per_user"), total=option_count("ui_reads_total"))
