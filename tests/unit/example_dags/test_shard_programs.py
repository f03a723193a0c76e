"""The example shard programs' pure parts: deterministic work, the items log, the loop on a memory store."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from airflow_kueue_provider.worker import Shard
from example_dags.shard_programs import aligner, monte_carlo_pricer, shard_loop
from example_dags.shard_programs.shard_loop import LoggedItem, expected_output, parse_items_log, run_loop

from ..worker.test_shard import PREFIX, MemoryStore


def test_the_aligner_finds_an_unmutated_read_at_its_place_with_a_full_score() -> None:
    ref = aligner.reference(3)
    assert len(ref) == aligner.REFERENCE_LENGTH and set(ref) <= set(aligner.BASES)
    read = ref[1000 : 1000 + aligner.READ_LENGTH]
    assert aligner.align(read, 3) == (aligner.READ_LENGTH * aligner.MATCH, 1000)
    assert aligner.align("N" * aligner.READ_LENGTH, 3) == (0, -1)


def test_the_aligners_items_are_deterministic_and_differ_by_shard_and_item() -> None:
    values = [aligner.align_item(s, i) for s in (0, 1) for i in range(3)]
    assert values == [aligner.align_item(s, i) for s in (0, 1) for i in range(3)]
    assert len(set(values)) == len(values)
    assert all(isinstance(v, int) and v > 0 for v in values)


def test_the_pricers_items_are_deterministic_and_a_lower_strike_is_worth_more() -> None:
    assert monte_carlo_pricer.price_item(2, 5) == monte_carlo_pricer.price_item(2, 5)
    assert monte_carlo_pricer.price_item(2, 5) != monte_carlo_pricer.price_item(2, 6)
    assert monte_carlo_pricer.price_item(2, 5, seed=1) != monte_carlo_pricer.price_item(2, 5)

    def mean(shard: int) -> float:
        return sum(monte_carlo_pricer.price_item(shard, i) for i in range(20)) / 20

    assert mean(0) > mean(2) > mean(4) > 0  # strikes 90 > 100 > 110


def test_the_items_log_reads_back_and_names_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "items"
    shard_loop.record_item(str(path), 4, 17, "pod-a", 1700000000.25)
    shard_loop.record_item(str(path), 4, 18, "pod-b", 1700000001.5)
    assert parse_items_log(path.read_text()) == [
        LoggedItem(4, 17, "pod-a", 1700000000.25),
        LoggedItem(4, 18, "pod-b", 1700000001.5),
    ]
    with pytest.raises(ValueError, match="line 2"):
        parse_items_log("1:2 p 3.0\nnot a line\n")


def _args(parser: argparse.ArgumentParser, log: Path, *extra: str) -> argparse.Namespace:
    args = parser.parse_args(["--items", "7", "--checkpoint-every", "3", "--items-log", str(log), *extra])
    shard_loop.check_loop_args(parser, args)
    return args


@pytest.mark.parametrize("program", [aligner, monte_carlo_pricer], ids=lambda p: p.PROGRAM)
def test_the_loop_checkpoints_every_k_resumes_and_ends_with_the_expected_output(
    program: object, tmp_path: Path
) -> None:
    parser, make_work, name = program.parser(), program.make_work, program.PROGRAM  # type: ignore[attr-defined]
    log, store = tmp_path / "items", MemoryStore()
    args = _args(parser, log)
    work = make_work(args)
    first = Shard(5, 1, store, prefix=PREFIX)
    # a first pod that stopped after item 3 (its last periodic checkpoint said next=3)
    first.save({"next": 3, "total": expected_output(name, work, 5, 3)["total"]}, progress=3)
    first.close()
    shard = Shard(5, 1, store, prefix=PREFIX)
    run_loop(shard, name, work, args, "pod-2")
    shard.close()
    assert [(e.shard, e.item, e.pod) for e in parse_items_log(log.read_text())] == [
        (5, i, "pod-2") for i in range(3, 7)
    ]
    folder = f"{PREFIX}/shards/5/"
    saved = sorted(d["state"]["next"] for n, (d, _) in store.blobs.items() if "checkpoint-" in n)
    assert saved == [3, 6], "every 3 items (after item 6), never at the end"
    done = store.blobs[f"{folder}done.json"][0]
    assert done["output"] == expected_output(name, work, 5, 7)
    assert done["output"]["total"] == sum(work(5, i) for i in range(7))  # the same fold, in item order


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--items", "0"], "--items=0"),
        (["--items", "3", "--checkpoint-every", "0"], "--checkpoint-every=0"),
        (["--items", "3", "--item-seconds", "-1"], "--item-seconds=-1"),
        (["--items", "3", "--paths", "0"], "--paths=0"),
    ],
)
def test_bad_options_end_the_program_early_naming_the_option(
    argv: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        monte_carlo_pricer.run([*argv, "--items-log", str(tmp_path / "items")])
    assert ended.value.code == 2 and named in capsys.readouterr().err
