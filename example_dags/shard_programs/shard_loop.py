"""The loop both example shard programs share: resume, work item by item, record, checkpoint, finish.

Each item's value comes from a pure ``work(shard_id, item)``; the shard's output is the fold of those values
in item order (``expected_output``), so a resumed or redone shard must end with exactly that output. Each item
is recorded in the items log inside ``shard.critical()`` together with the progress it implies, so a SIGTERM
never separates "recorded" from "checkpointed": with a grace period every item appears exactly once; after a
SIGKILL the items since the last periodic checkpoint appear again (at most ``--checkpoint-every - 1``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_kueue_provider.worker import Shard

Work = Callable[[int, int], float]
"""``work(shard_id, item) -> value``: deterministic, no I/O."""

log = logging.getLogger("example_dags.shard_programs")


@dataclass(frozen=True)
class LoggedItem:
    """One line of the items log: ``<shard>:<item> <pod> <unix time>``."""

    shard: int
    item: int
    pod: str
    t: float


def add_loop_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--items", type=int, required=True, help="items in this shard (>= 1)")
    parser.add_argument("--checkpoint-every", type=int, default=10, help="save a checkpoint every K items")
    parser.add_argument("--item-seconds", type=float, default=0.0, help="pad each item to at least this")
    parser.add_argument("--items-log", required=True, help="append '<shard>:<item> <pod> <t>' per item here")
    parser.add_argument("--redo-done", action="store_true", help="run a shard already marked done again")
    parser.add_argument(
        "--fail-once",
        default="",
        help="fault injection for tests: shard ids (e.g. '2,5') that fail the first time they start "
        "(a marker file next to the items log remembers it)",
    )


def check_loop_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Bad values end the program at once (exit 2), naming the option and what it needs."""
    if args.items < 1:
        parser.error(f"--items={args.items}: give the number of items in the shard (>= 1)")
    if args.checkpoint_every < 1:
        parser.error(f"--checkpoint-every={args.checkpoint_every}: checkpoint every K >= 1 items")
    if args.item_seconds < 0:
        parser.error(f"--item-seconds={args.item_seconds}: pad items to >= 0 seconds")


def record_item(path: str, shard_id: int, item: int, pod: str, t: float) -> None:
    """One line with a single write(2) on an O_APPEND fd: atomic and unbuffered, safe across pods."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{shard_id}:{item} {pod} {t:.6f}\n".encode())
    finally:
        os.close(fd)


def parse_items_log(text: str) -> list[LoggedItem]:
    """The items log's lines, in order; a malformed line raises ValueError naming it."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            key, pod, t = line.split(" ")
            shard, item = key.split(":")
            found.append(LoggedItem(int(shard), int(item), pod, float(t)))
        except ValueError:
            raise ValueError(f"items log line {number} is not '<shard>:<item> <pod> <t>': {line!r}") from None
    return found


def fold(total: float, value: float) -> float:
    return total + value


def expected_output(program: str, work: Work, shard_id: int, items: int) -> dict[str, Any]:
    """What ``mark_done`` records for a shard that processed ``items`` items, however often it resumed."""
    total: float = 0
    for item in range(items):
        total = fold(total, work(shard_id, item))
    return {"program": program, "items": items, "total": total}


class InjectedFailure(RuntimeError):
    """``--fail-once``: the shard fails on its first start, on purpose."""


def fail_once(args: argparse.Namespace, shard_id: int) -> None:
    """Raise ``InjectedFailure`` the first time a shard listed in ``--fail-once`` starts (O_EXCL marker)."""
    if str(shard_id) not in {s.strip() for s in args.fail_once.split(",")}:
        return
    try:
        os.close(os.open(f"{args.items_log}.failed-{shard_id}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        return
    raise InjectedFailure(f"shard {shard_id}: --fail-once, its first start fails")


def run_loop(shard: Shard, program: str, work: Work, args: argparse.Namespace, pod: str) -> None:
    """Resume from the most progressed checkpoint, process the remaining items, mark the shard done."""
    fail_once(args, shard.shard_id)
    state: dict[str, Any] = shard.load() or {"next": 0, "total": 0}
    log.info("%s: shard %d (index %d) starts at item %d of %d on %s", program, shard.shard_id, shard.index,
             state["next"], args.items, pod)  # fmt: skip
    for item in range(int(state["next"]), args.items):
        started = time.monotonic()
        value = work(shard.shard_id, item)
        pad = args.item_seconds - (time.monotonic() - started)
        if pad > 0:
            time.sleep(pad)
        with shard.critical():  # the record and the progress it implies: never split by a SIGTERM
            record_item(args.items_log, shard.shard_id, item, pod, time.time())
            state = {"next": item + 1, "total": fold(state["total"], value)}
            shard.set_latest(state, progress=item + 1)
        if (item + 1) % args.checkpoint_every == 0:
            shard.save(state, progress=item + 1)
    shard.mark_done({"program": program, "items": args.items, "total": state["total"]})
    log.info("%s: shard %d done, total %s", program, shard.shard_id, state["total"])


def main(
    program: str,
    parser: argparse.ArgumentParser,
    make_work: Callable[[argparse.Namespace], Work],
    argv: Sequence[str] | None = None,
) -> int:
    """Parse (``make_work`` turns the program's own options into its ``work``, or raises ValueError naming
    the bad option), then run the shards of this pod not done yet: one, or several when the task packs them
    (``shards_per_pod``); ``Shard.each_from_env`` reads the env the operator injects."""
    args = parser.parse_args(argv)
    check_loop_args(parser, args)
    try:
        work = make_work(args)
    except ValueError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    pod = os.environ.get("HOSTNAME") or "local"
    if args.redo_done:  # the one shard of this pod, again, whatever it did before
        with Shard.from_env(skip_if_done=False) as shard:
            run_loop(shard, program, work, args, pod)
        return 0
    # A shard already marked done (by a retried or duplicate pod) is skipped, before any work; a shard that
    # raises is logged, the others go on, and the process then exits 1 naming it (its index is retried).
    for shard in Shard.each_from_env():
        with shard:
            run_loop(shard, program, work, args, pod)
    return 0
