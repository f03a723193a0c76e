"""A sample shard program: ``python -m airflow_kueue_provider.worker.sample_shard --items N ...``.

It processes items ``0..N-1`` of its shard (item id ``<shard_id>:<i>``), appends each processed item id to
``--counter-file`` (one line per item: a duplicate line proves an item ran twice), checkpoints every
``--checkpoint-every`` items and marks the shard done. Each checkpoint's progress is the number of items done,
so a second pod of the same index that is behind can never move the shard back. SIGTERM flushes the progress
and exits 143; a restart resumes after the last recorded item.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

from .shard import Shard


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sample_shard", description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, required=True, help="items in this shard")
    parser.add_argument("--checkpoint-every", type=int, default=10, help="save a checkpoint every K items")
    parser.add_argument("--item-seconds", type=float, default=0.1, help="simulated work per item")
    parser.add_argument("--counter-file", required=True, help="append each processed item id here")
    parser.add_argument("--input-pattern", default="", help="the shard's input, e.g. chromosome_{shard}.bam")
    parser.add_argument("--redo-done", action="store_true", help="run a shard already marked done again")
    return parser.parse_args(argv)


def _record(path: str, item: str) -> None:
    """Append one line with a single write(2) on an O_APPEND fd: atomic, unbuffered, safe across pods."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{item}\n".encode())
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    log = logging.getLogger("sample_shard")
    # A shard already marked done (a retried or duplicate pod) exits 0 here, before any work.
    with Shard.from_env(skip_if_done=not args.redo_done) as shard:
        if args.input_pattern:
            log.info("shard %d reads %s", shard.shard_id, args.input_pattern.format(shard=shard.shard_id))
        state = shard.load() or {"next": 0}
        log.info(
            "shard %d (index %d) starts at item %d of %d",
            shard.shard_id,
            shard.index,
            state["next"],
            args.items,
        )
        for i in range(int(state["next"]), args.items):
            time.sleep(args.item_seconds)  # the work
            with shard.critical():  # recording the item and the progress it implies must not be split
                _record(args.counter_file, f"{shard.shard_id}:{i}")
                state = {"next": i + 1}
                shard.set_latest(state, progress=i + 1)
            if (i + 1) % args.checkpoint_every == 0:
                shard.save(state, progress=i + 1)
        shard.mark_done({"items": args.items})
        log.info("shard %d done", shard.shard_id)
    return 0


if __name__ == "__main__":
    sys.exit(main())
