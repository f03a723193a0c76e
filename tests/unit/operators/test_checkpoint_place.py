"""Where a task instance's checkpoints live: the salted shard container, named through the ledger."""

from __future__ import annotations

from airflow_kueue_provider.hooks.ledger_store import LedgerStore
from airflow_kueue_provider.kueue.checkpoints.checkpoint_access import shard_container_name
from airflow_kueue_provider.kueue.checkpoints.ledger import RunLedger

from .blob_fakes import MemoryBlobs, place


def test_without_a_ledger_the_container_is_unsalted_until_one_is_made_with_the_fresh_salt() -> None:
    blobs = MemoryBlobs()
    where = place(blobs=blobs)
    assert where.container_salt is None and where.shard_container == shard_container_name("ckpt", "d/r/t")
    assert blobs.writes == 0, "reading the name writes nothing"

    salt = where.salt_to_create()

    assert salt is not None and where.container_salt == salt
    assert where.shard_container == where.named(salt) == shard_container_name("ckpt", "d/r/t", salt)
    ((doc, _),) = blobs.blobs.values()
    assert doc["container_salt"] == salt and doc["shard_count"] == 4
    assert where.salt_to_create() == salt and blobs.writes == 1, "made once"


def test_an_existing_ledger_names_the_container_and_new_ledgers_keep_its_salt() -> None:
    blobs = MemoryBlobs()
    theirs = "0123456789abcdef" * 2
    LedgerStore(blobs, "d/r/t").update(lambda _: RunLedger(4, container_salt=theirs))  # type: ignore[arg-type]
    where = place(blobs=blobs)

    assert where.salt_to_create() == theirs and where.container_salt == theirs
    assert where.new_ledger().container_salt == theirs, "a ledger made anew keeps the salt this session uses"


def test_an_old_ledger_of_before_salts_keeps_its_unsalted_container() -> None:
    blobs = MemoryBlobs()
    blobs.write_json("d/r/t/ledger.json", {"version": 1, "shard_count": 4, "completed": "", "attempts": []})
    where = place(blobs=blobs)
    assert where.salt_to_create() is None and where.shard_container == shard_container_name("ckpt", "d/r/t")
    assert blobs.writes == 1, "the old ledger is not rewritten"
