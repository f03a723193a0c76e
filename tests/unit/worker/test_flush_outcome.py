"""The line that says what a SIGTERM flush did."""

from __future__ import annotations

from airflow_kueue_provider.worker.flush_outcome import FlushOutcome


def test_the_line_says_the_checkpoint_or_why_there_is_none() -> None:
    assert FlushOutcome().describe() == "the flush has not finished"
    none = FlushOutcome(done=True, error="did not finish in time", seconds=27.5)
    assert none.describe() == "no checkpoint written: the flush did not finish in time (27.50s)"
    written = FlushOutcome(done=True, seq=7, progress=30, seconds=0.421, split_block=True)
    assert written.describe() == (
        "checkpoint 7 (progress 30) written in 0.42s (a critical block outlasted the budget and was split)"
    )
