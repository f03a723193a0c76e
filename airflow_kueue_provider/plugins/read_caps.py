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
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

RETRY_AFTER_SECONDS = 2
"""What a refused read's ``Retry-After`` asks: a page read takes about a second on a healthy cluster."""
DEFAULT_PER_USER = 8
DEFAULT_TOTAL = 32


class TooManyReads(Exception):
    """A new read would pass ``[kueue] ui_reads_per_user`` or ``ui_reads_total``."""


class ReadCaps:
    """Slots per user and in this API server process, and the pool of threads the reads run in."""

    def __init__(self, per_user: int, total: int) -> None:
        for option, value in (("ui_reads_per_user", per_user), ("ui_reads_total", total)):
            if value < 1:
                raise ValueError(
                    f"[kueue] {option} must be at least 1, got {value}; set it to a positive count"
                )
        self.per_user = per_user
        self.total = total
        self._running: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    @property
    def running_total(self) -> int:
        with self._lock:
            return sum(self._running.values())

    def running_for(self, user: str) -> int:
        with self._lock:
            return self._running[user]

    @property
    def users(self) -> int:
        """Users with a read running (the size of the per-user map)."""
        with self._lock:
            return len(self._running)

    def acquire(self, user: str) -> Callable[[], None]:
        """Take a slot of ``user`` and return its release (idempotent, from any thread), or raise
        ``TooManyReads`` saying how many run and which option raises the cap."""
        with self._lock:
            mine, everyone = self._running[user], sum(self._running.values())
            if mine >= self.per_user:
                raise TooManyReads(
                    f"{mine} Kueue page reads of yours are already running (at most {self.per_user} a user: "
                    "[kueue] ui_reads_per_user); wait for them, or ask for that option to be raised"
                )
            if everyone >= self.total:
                raise TooManyReads(
                    f"{everyone} Kueue page reads are already running on this API server (at most "
                    f"{self.total}: [kueue] ui_reads_total); try again shortly, or ask for that option to be "
                    "raised"
                )
            self._running[user] += 1
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if released:
                    return
                released = True
                self._running[user] -= 1
                if self._running[user] <= 0:
                    del self._running[user]

        return release

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
    """The caps from ``[kueue]`` (``AIRFLOW__KUEUE__UI_READS_PER_USER``, ``..._TOTAL`` or the config file)
    through Airflow's ``conf``, as the plugin's connection and namespaces: the API server runs no DAG code
    that could change it, and ``kueue_option``'s environment at exec is blank there (``airflow api-server``
    calls ``setproctitle``, which overwrites ``/proc/self/environ``)."""
    from airflow.configuration import conf

    def option(key: str) -> Any:
        return conf.get("kueue", key, fallback=None)

    return ReadCaps(
        per_user=_count(option("ui_reads_per_user"), "ui_reads_per_user", DEFAULT_PER_USER),
        total=_count(option("ui_reads_total"), "ui_reads_total", DEFAULT_TOTAL),
    )


def _count(raw: Any, option: str, default: int) -> int:
    if raw is None or str(raw).strip() == "":
        return default
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ValueError(f"[kueue] {option} must be a whole number, got {raw!r}") from None
