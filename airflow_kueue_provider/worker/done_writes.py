"""A pack's done markers, written while the next shard runs (``shard_pack``).

A shard's ``mark_done`` in a pack hands its ``done.json`` write to one daemon thread and returns: the next
shard starts without waiting on the Blob round trip (with ``done_lookahead`` no round trip is left on a
shard's path). The writes go out in order. Before the pod ends, the pack waits for them: at the loop's end
for all of them, and a shard whose marker could not be written (Blob unavailable after the store's retries)
counts as failed, so the pod exits 1 and the index's next pod runs it again. When the loop ends otherwise
(a SIGTERM, an error) the pack waits at most ``DRAIN_ON_EXIT_SECONDS`` (and never more than half the grace
period); a marker not written by then is a shard that runs again, never one lost.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

DRAIN_ON_EXIT_SECONDS = 5.0
"""How long a pack that ends early (SIGTERM, error) waits for the done markers still being written."""
THREAD_NAME = "kueue-done-write"


class DoneWrites:
    """Done-marker writes on one daemon thread, in order; ``drain`` says which shards' did not go out."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[int, Callable[[], None]] | None] = queue.Queue()
        self._failed: dict[int, str] = {}
        self._pending: set[int] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, shard_id: int, write: Callable[[], None]) -> None:
        """Write ``shard_id``'s marker with ``write`` (raises what the store raises) after those before."""
        with self._lock:
            self._pending.add(shard_id)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
                self._thread.start()
        self._queue.put((shard_id, write))

    def drain(self, timeout: float | None = None) -> dict[int, str]:
        """Wait for the writes submitted so far (at most ``timeout`` seconds; None: as long as they take);
        the shards whose marker is not written, each with why. Stops the thread."""
        thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout)
        with self._lock:
            failed = dict(self._failed)
            for shard_id in self._pending - set(failed):
                failed[shard_id] = "its done marker was still being written when the pod stopped"
            return failed

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            shard_id, write = item
            try:
                write()
            except Exception as exc:  # reported by drain, as the shard's failure
                with self._lock:
                    self._failed[shard_id] = f"its done marker was not written: {type(exc).__name__}: {exc}"
            finally:
                with self._lock:
                    self._pending.discard(shard_id)
