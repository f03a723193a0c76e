"""A shard loop for ``test_sigterm_flush.py``: the sample shard's loop, plus heavy and slow logging.

``python sigterm_loop.py --items N --counter FILE [--slow-log S] [--item-seconds S] [--every K]``, with the
env the operator injects (``Shard.from_env``). Every item is logged three times, once inside its critical
block, through a handler that holds its lock for ``--slow-log`` seconds per record while a second thread logs
through it all the time: a SIGTERM often lands inside a logging call or waits for that lock.

On stdout (for the test): ``READY`` once the handler is installed, ``LOOP <next>`` when the loop starts,
``SAVING <i>`` before each periodic save, and at exit ``SIGNAL-AT <where>``: what the main thread was doing
when the Python-level handler ran (``logging``, ``blob`` (a Blob call), ``critical``, ``other``), or
``HARD-EXIT`` when the flush thread had to end the process with os._exit.
"""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

from airflow_kueue_provider.worker.shard import Shard


class SlowHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Holds its lock ``delay`` seconds per record, as a handler writing to a slow sink does."""

    def __init__(self, delay: float) -> None:
        super().__init__(sys.stderr)
        self.delay = delay

    def emit(self, record: logging.LogRecord) -> None:
        time.sleep(self.delay)
        super().emit(record)


def _where(frame: FrameType | None) -> str:
    found = set()
    while frame is not None:
        path = frame.f_code.co_filename
        if f"logging{os.sep}__init__" in path:
            found.add("logging")
        elif "azure" in path or "blob_store" in path or "urllib3" in path or "requests" in path:
            found.add("blob")
        elif frame.f_code.co_name == "critical" and path.endswith("shard.py"):
            found.add("critical")
        frame = frame.f_back
    for kind in ("logging", "blob", "critical"):
        if kind in found:
            return kind
    return "other"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, required=True)
    parser.add_argument("--counter", required=True)
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--item-seconds", type=float, default=0.0)
    parser.add_argument("--slow-log", type=float, default=0.0)
    args = parser.parse_args()

    logging.basicConfig(level=logging.INFO, handlers=[SlowHandler(args.slow_log)], format="%(message)s")
    log = logging.getLogger("sigterm_loop")
    stop_chatter = threading.Event()

    def chatter() -> None:
        n = 0
        while not stop_chatter.wait(0.001 if args.slow_log else 0.05):
            n += 1
            logging.getLogger("chatter").info("background record %d", n)

    threading.Thread(target=chatter, daemon=True).start()

    signal_at: list[str] = []

    def report() -> None:
        os.write(1, f"SIGNAL-AT {signal_at[0] if signal_at else 'none'}\n".encode())

    atexit.register(report)
    with Shard.from_env() as shard:
        shard_handler: Any = signal.getsignal(signal.SIGTERM)

        def observe(signum: int, frame: FrameType | None) -> None:  # no lock, no I/O: a list append
            if not signal_at:
                signal_at.append(_where(frame))
            shard_handler(signum, frame)

        signal.signal(signal.SIGTERM, observe)
        hard_exit = shard.sigterm._hard_exit

        def report_hard_exit(code: int) -> None:  # the flush thread's backstop: the main thread did not exit
            os.write(1, b"HARD-EXIT\n")
            hard_exit(code)

        shard.sigterm._hard_exit = report_hard_exit
        os.write(1, b"READY\n")
        if shard.is_done():
            return 0
        state = shard.load() or {"next": 0}
        os.write(1, f"LOOP {state['next']}\n".encode())
        for i in range(int(state["next"]), args.items):
            log.info("item %d: working", i)
            if args.item_seconds:
                time.sleep(args.item_seconds)
            with shard.critical():
                fd = os.open(args.counter, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, f"{shard.shard_id}:{i}\n".encode())
                finally:
                    os.close(fd)
                log.info("item %d: recorded", i)
                state = {"next": i + 1}
                shard.set_latest(state, progress=i + 1)
            log.info("item %d: done", i)
            if (i + 1) % args.every == 0:
                os.write(1, f"SAVING {i + 1}\n".encode())
                shard.save(state, progress=i + 1)
        shard.mark_done({"items": args.items})
        stop_chatter.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())
