"""Keeping a trigger runner's long-lived objects out of the garbage collector's full passes.

A triggerer's trigger runner carries all of Airflow's imports, about 400,000 tracked objects, and a full
collection walks them all: 340-480 ms measured with 1,000 triggers, every event of that moment waiting behind
it and Airflow warning that the loop was blocked. Those objects live as long as the process, so walking them
finds nothing; frozen (``gc.freeze``), they are skipped: what Airflow's own DAG processor and LocalExecutor
do before they fork.

Frozen first when the first watch has synced (``freeze_once``). A pick-up of many triggers then builds as
many objects again (Airflow's and the triggers'), which live as long as their triggers; so once the number
of followers has doubled since the last freeze and none came for ``SETTLE_SECONDS``, the process is frozen
again (``followers_changed``): a few times per process, not per trigger. Cyclic garbage that exists at a
freeze stays in memory; a collection of the young generations just before keeps that small.
``AIRFLOW_KUEUE_GC_FREEZE=0`` leaves the collector alone.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os

log = logging.getLogger(__name__)

GC_FREEZE_ENV = "AIRFLOW_KUEUE_GC_FREEZE"
"""``0`` keeps the process's garbage collector as it is."""
SETTLE_SECONDS = 5.0
"""Freeze again once no new follower came for this long (a pick-up of triggers is over)."""
GROWTH = 2
"""... and the followers are at least this many times as many as at the last freeze."""


class _State:
    frozen_at: int | None = None
    """Followers at the last freeze; None: not frozen yet."""
    pending: asyncio.TimerHandle | None = None


def _enabled() -> bool:
    return os.environ.get(GC_FREEZE_ENV, "1") != "0"


def _freeze(followers: int) -> None:
    _State.pending = None
    _State.frozen_at = max(followers, 1)
    gc.collect(1)  # the young generations' garbage, so it is not frozen with the rest (cheap)
    gc.freeze()
    log.debug("froze the garbage collector at %d followers (%d objects)", followers, gc.get_freeze_count())


def freeze_once(followers: int = 1) -> None:
    """The first freeze, once per process, when the first watch has synced."""
    if _State.frozen_at is None and _enabled():
        _freeze(followers)


def followers_changed(followers: int) -> None:
    """Called with the process's number of followers as one comes: (re)arms the freeze after a pick-up."""
    if _State.frozen_at is None or followers < GROWTH * _State.frozen_at or not _enabled():
        return
    if _State.pending is not None:
        _State.pending.cancel()
    _State.pending = asyncio.get_running_loop().call_later(SETTLE_SECONDS, _freeze, followers)
