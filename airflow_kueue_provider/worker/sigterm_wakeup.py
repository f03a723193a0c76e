"""The pipe a SIGTERM wakes the flush thread through, and the handler's installation around it.

The Python handler writes one byte to the pipe (``os.write``: async-signal-safe, no lock); the C-level
``signal.set_wakeup_fd`` writes to the same pipe, so the flush thread, blocked in ``os.read``, wakes even
while the main thread is stuck in a C call and the Python handler cannot run yet.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from contextlib import suppress
from types import FrameType
from typing import Any

WAKE_SIGTERM = bytes([signal.SIGTERM])  # what set_wakeup_fd writes for SIGTERM; the handler writes it too
WAKE_QUIT = b"q"  # quit(): stop the flush thread

Handler = Callable[[int, FrameType | None], Any]


class WakeupPipe:
    """One SIGTERM handler's installation: the pipe, the previous handler and wake-up fd to put back."""

    def __init__(self) -> None:
        self.read_fd = self._write_fd = -1
        self._previous_handler: Any = None
        self._own_wakeup_fd = False

    def install(self, handler: Handler) -> None:
        """Open the pipe, install ``handler`` for SIGTERM and point the C-level wake-up at the pipe, unless
        someone (an asyncio loop) already has it: then the handler's own byte wakes the flush thread."""
        self.read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)  # a flood of signals never blocks the handler
        try:
            self._previous_handler = signal.signal(signal.SIGTERM, handler)
        except BaseException:
            self.close()
            raise
        previous_fd = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        self._own_wakeup_fd = previous_fd == -1
        if not self._own_wakeup_fd:  # someone's: leave it
            signal.set_wakeup_fd(previous_fd)

    def restore(self) -> None:
        """Put the previous SIGTERM handler and wake-up fd back (the pipe stays open for the flush thread)."""
        signal.signal(signal.SIGTERM, self._previous_handler)
        if self._own_wakeup_fd:
            current = signal.set_wakeup_fd(-1)
            if current != self._write_fd:  # replaced after us: put theirs back
                signal.set_wakeup_fd(current)

    def wake(self) -> None:
        """The handler's one write: no lock, no logging; a full pipe means a wake-up is already pending."""
        try:  # noqa: SIM105 - plain try: the least work a signal handler can do
            os.write(self._write_fd, WAKE_SIGTERM)
        except OSError:  # the pipe is full or closed
            pass

    def quit(self) -> None:
        """Wake the flush thread to end it without a flush."""
        with suppress(OSError):
            os.write(self._write_fd, WAKE_QUIT)

    @staticmethod
    def wait_for_sigterm(read_fd: int) -> bool:
        """Block in ``os.read`` until a SIGTERM (True) or ``quit()`` / a closed pipe (False); the bytes of
        other signals (through ``set_wakeup_fd``) are skipped."""
        while True:
            try:
                byte = os.read(read_fd, 1)
            except OSError:
                return False
            if not byte or byte == WAKE_QUIT:
                return False
            if byte == WAKE_SIGTERM:
                return True

    def close(self) -> None:
        for fd in (self.read_fd, self._write_fd):
            if fd >= 0:
                with suppress(OSError):
                    os.close(fd)
        self.read_fd = self._write_fd = -1
