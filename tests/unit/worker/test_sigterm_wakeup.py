"""The SIGTERM handler's pipe: a SIGTERM wakes the flush thread, other signals and quit() do not flush."""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

from airflow_kueue_provider.worker.sigterm_wakeup import WakeupPipe


def test_only_a_sigterm_byte_wakes_the_flush_thread() -> None:
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, bytes([signal.SIGUSR1, signal.SIGCHLD, signal.SIGTERM]))
        assert WakeupPipe.wait_for_sigterm(read_fd) is True
        os.write(write_fd, b"q")
        assert WakeupPipe.wait_for_sigterm(read_fd) is False
    finally:
        os.close(write_fd)
    assert WakeupPipe.wait_for_sigterm(read_fd) is False  # a closed pipe ends the thread too
    os.close(read_fd)


def test_a_sigterm_reaches_the_handler_and_the_pipe_and_restore_puts_the_previous_handler_back() -> None:
    seen: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        seen.append(signum)

    previous = signal.getsignal(signal.SIGTERM)
    pipe = WakeupPipe()
    pipe.install(handler)
    woke: list[bool] = []
    watcher = threading.Thread(target=lambda: woke.append(WakeupPipe.wait_for_sigterm(pipe.read_fd)))
    watcher.start()
    try:
        signal.raise_signal(signal.SIGTERM)
        watcher.join(5)
        assert seen == [signal.SIGTERM] and woke == [True]
    finally:
        pipe.restore()
        pipe.close()
    assert signal.getsignal(signal.SIGTERM) == previous
    assert signal.set_wakeup_fd(-1) == -1  # ours was taken back
    assert pipe.read_fd == -1


def test_quit_wakes_the_flush_thread_without_a_flush() -> None:
    pipe = WakeupPipe()
    pipe.install(lambda signum, frame: None)
    try:
        pipe.quit()
        pipe.wake()  # and a wake after it is not read: the thread has ended
        assert WakeupPipe.wait_for_sigterm(pipe.read_fd) is False
    finally:
        pipe.restore()
        pipe.close()
