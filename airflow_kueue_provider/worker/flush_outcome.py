"""What a shard's SIGTERM flush did: the checkpoint it wrote or why none, how long it took, and the line that
says so in the task log (or straight on stderr when the process must end before the main thread logs)."""

from __future__ import annotations

from dataclasses import dataclass

from .checkpoint_store import Progress


@dataclass
class FlushOutcome:
    """Written by the flush thread, each field once, before ``done``; read by the main thread after it."""

    done: bool = False
    seq: int | None = None
    """The checkpoint the flush wrote."""
    error: str | None = None
    """Why it wrote none (``had nothing to write``, ``did not finish in time``, ``failed: ...``)."""
    progress: Progress | None = None
    seconds: float | None = None
    """Signal -> flush finished."""
    split_block: bool = False
    """A critical block outlasted the budget and was split."""

    def describe(self) -> str:
        """``checkpoint 7 (progress ...) written in 0.42s``, or why no checkpoint was written."""
        took = self.seconds or 0.0
        split = " (a critical block outlasted the budget and was split)" if self.split_block else ""
        if not self.done:
            return "the flush has not finished"
        if self.seq is None:
            return f"no checkpoint written: the flush {self.error} ({took:.2f}s){split}"
        return f"checkpoint {self.seq} (progress {self.progress}) written in {took:.2f}s{split}"
