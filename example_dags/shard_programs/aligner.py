"""Align synthetic reads of one chromosome shard to a synthetic reference: a real, small shard program.

``python -m example_dags.shard_programs.aligner --items N --items-log FILE [--checkpoint-every K]
[--item-seconds S] [--reads-per-item R] [--input-pattern chromosome_{shard}.bam]``, with the env the
operator injects. Shard ``s`` is chromosome ``s``: a reference of ``REFERENCE_LENGTH`` bases drawn from
``Random("chr<s>")``. Item ``i`` is a batch of reads sampled from it with mutations
(``Random("reads:<s>:<i>")``); each read is seeded by its k-mers and scored by a Smith-Waterman local
alignment around every candidate. The item's value is the sum over its reads of ``score * 10007 +
position``: an integer, the same every run.
"""

from __future__ import annotations

import argparse
import functools
import random
import sys
from collections.abc import Sequence

from .shard_loop import Work, add_loop_args, main

PROGRAM = "aligner"
BASES = "ACGT"
REFERENCE_LENGTH = 4096
READ_LENGTH = 36
K = 9  # seed k-mer length
SLACK = 4  # bases either side of a candidate position in the alignment window
MATCH, MISMATCH, GAP = 2, -1, -2


@functools.lru_cache(maxsize=8)
def reference(shard_id: int) -> str:
    rng = random.Random(f"chr{shard_id}")
    return "".join(rng.choice(BASES) for _ in range(REFERENCE_LENGTH))


@functools.lru_cache(maxsize=8)
def kmer_index(shard_id: int) -> dict[str, list[int]]:
    ref = reference(shard_id)
    index: dict[str, list[int]] = {}
    for pos in range(len(ref) - K + 1):
        index.setdefault(ref[pos : pos + K], []).append(pos)
    return index


def reads(shard_id: int, item: int, count: int) -> list[str]:
    """``count`` reads of the item: reference substrings with up to 3 substitutions each."""
    rng, ref = random.Random(f"reads:{shard_id}:{item}"), reference(shard_id)
    found = []
    for _ in range(count):
        start = rng.randrange(len(ref) - READ_LENGTH)
        read = list(ref[start : start + READ_LENGTH])
        for _ in range(rng.randrange(4)):
            read[rng.randrange(READ_LENGTH)] = rng.choice(BASES)
        found.append("".join(read))
    return found


def local_score(read: str, window: str) -> int:
    """Smith-Waterman local alignment score (linear gaps), O(len(read) * len(window))."""
    previous = [0] * (len(window) + 1)
    best = 0
    for a in read:
        row = [0]
        for j, b in enumerate(window, 1):
            score = max(
                0, previous[j - 1] + (MATCH if a == b else MISMATCH), previous[j] + GAP, row[-1] + GAP
            )
            row.append(score)
            best = max(best, score)
        previous = row
    return best


def align(read: str, shard_id: int) -> tuple[int, int]:
    """``(score, position)`` of the read's best candidate (ties: the lowest position); ``(0, -1)`` when no
    k-mer of it is in the reference."""
    ref, index = reference(shard_id), kmer_index(shard_id)
    candidates = {
        hit - offset
        for offset in range(0, READ_LENGTH - K + 1, K)
        for hit in index.get(read[offset : offset + K], ())
        if hit >= offset
    }
    best = (0, -1)
    for pos in sorted(candidates):
        score = local_score(read, ref[max(0, pos - SLACK) : pos + READ_LENGTH + SLACK])
        if score > best[0]:
            best = (score, pos)
    return best


def align_item(shard_id: int, item: int, reads_per_item: int = 4) -> int:
    """The item's value: ``sum(score * 10007 + position)`` over its reads."""
    return sum(
        score * 10007 + pos
        for score, pos in (align(r, shard_id) for r in reads(shard_id, item, reads_per_item))
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.splitlines()[0])
    add_loop_args(p)
    p.add_argument("--reads-per-item", type=int, default=4, help="reads aligned per item (>= 1)")
    p.add_argument(
        "--input-pattern", default="", help="the shard's input as named in logs, e.g. chr_{shard}.bam"
    )
    return p


def make_work(args: argparse.Namespace) -> Work:
    if args.reads_per_item < 1:
        raise ValueError(f"--reads-per-item={args.reads_per_item}: align >= 1 read per item")
    return functools.partial(align_item, reads_per_item=args.reads_per_item)


def run(argv: Sequence[str] | None = None) -> int:
    return main(PROGRAM, parser(), make_work, argv)


if __name__ == "__main__":
    sys.exit(run())
