"""Diagnostics for a trigger that stopped reacting: with AIRFLOW_KUEUE_DEBUG_SIGNAL set, SIGUSR2 logs every
hub's counters and the stack of every asyncio task of the loop (never in normal runs)."""

from __future__ import annotations

import asyncio
import io
import logging
import signal
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any

# The hub's logger, as before this module was split out of it: logging set up for the hub shows the dump.
log = logging.getLogger("airflow_kueue_provider.watch.namespace_watch")
DEBUG_SIGNAL_ENV = "AIRFLOW_KUEUE_DEBUG_SIGNAL"  # set: SIGUSR2 logs every hub's state and asyncio task


def install_debug_signal(
    loop: asyncio.AbstractEventLoop, hubs: Callable[[], Mapping[tuple[Any, str], Any]]
) -> None:
    """On SIGUSR2, log the counters of each hub (``NamespaceWatch``, not imported: it imports this module)
    that ``hubs()`` returns then and the stack of every asyncio task of ``loop``."""

    def dump() -> None:
        out = io.StringIO()
        for (_, ns), hub in hubs().items():
            sizes = {slot: len(objects) for slot, objects in hub.objects.items()}
            print(
                f"hub {ns}: synced={hub.synced.is_set()} lists={hub.lists} failures={hub.failures} "
                f"events={hub.events} objects={sizes} followers={sorted(hub.followers)} "
                f"task={hub._task}",
                file=out,
            )
        for task in asyncio.all_tasks(loop):
            print(f"--- {task!r}", file=out)
            task.print_stack(file=out)
        log.warning("asyncio state on SIGUSR2:\n%s", out.getvalue())

    with suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGUSR2, dump)
