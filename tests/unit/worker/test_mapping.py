"""Completion index → shard id (AIRFLOW_KUEUE_SHARDS), and the worker env parsing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.storage.blob_store import BlobStore
from airflow_kueue_provider.worker import (
    ShardEnv,
    shard_id_for_index,
    shard_ids_for_index,
    split_checkpoint_url,
)


@pytest.mark.parametrize(
    ("index", "shards", "expected"),
    [
        (0, None, 0),
        (41, None, 41),
        (0, "2,5,8", 2),
        (2, "8,2,5", 8),
        (999, "0-999", 999),
        (3, "0-1,10-12", 11),
    ],
)
def test_index_runs_the_ith_shard_in_ascending_order(index: int, shards: str | None, expected: int) -> None:
    assert shard_id_for_index(index, shards) == expected


@pytest.mark.parametrize(
    ("index", "shards", "message"), [(3, "2,5,8", "out of range"), (-1, None, "negative")]
)
def test_bad_index_is_refused(index: int, shards: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        shard_id_for_index(index, shards)


def test_empty_shard_list_is_refused() -> None:
    with pytest.raises(ValueError, match="set but empty"):
        shard_id_for_index(0, " ")


def test_a_huge_range_is_cheap() -> None:
    assert shard_id_for_index(99_999, "0-49999,100000-149999") == 149_999


@given(st.sets(st.integers(0, 500), min_size=1, max_size=60), st.data())
def test_mapping_matches_the_sorted_list(ids: set[int], data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(ids) - 1))
    assert shard_id_for_index(index, str(IndexSet.from_indexes(ids))) == sorted(ids)[index]


ENV = {
    "JOB_COMPLETION_INDEX": "1",
    "AIRFLOW_KUEUE_SHARDS": "3,7",
    "AIRFLOW_KUEUE_CHECKPOINT_URL": "http://127.0.0.1:10000/devstoreaccount1/airflow-kueue",
    "AIRFLOW_KUEUE_CHECKPOINT_PREFIX": "/dag/run/task/",
}


def test_env_is_parsed() -> None:
    env = ShardEnv.from_environ({**ENV, "AZURE_STORAGE_CONNECTION_STRING": "AccountKey=c2VjcmV0"})
    assert (env.index, env.shard_id, env.prefix, env.grace_seconds) == (1, 7, "dag/run/task", 25.0)
    assert (env.account_url, env.container) == ("http://127.0.0.1:10000/devstoreaccount1/", "airflow-kueue")
    assert "c2VjcmV0" not in repr(env)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"JOB_COMPLETION_INDEX": None}, "Indexed Job"),
        ({"AIRFLOW_KUEUE_CHECKPOINT_URL": None}, "CHECKPOINT_URL is not set"),
        ({"AIRFLOW_KUEUE_CHECKPOINT_URL": "http://host"}, "names no container"),
        ({"AIRFLOW_KUEUE_CHECKPOINT_PREFIX": ""}, "PREFIX is not set"),
        ({"AIRFLOW_KUEUE_GRACE_SECONDS": "soon"}, "not a number"),
        ({"AIRFLOW_KUEUE_SHARDS": "3"}, "out of range"),
    ],
)
def test_env_errors_name_the_variable(change: dict[str, str | None], message: str) -> None:
    env = {k: v for k, v in {**ENV, **change}.items() if v is not None}
    with pytest.raises(ValueError, match=message):
        ShardEnv.from_environ(env)


def test_a_packed_pod_runs_its_group_of_shards() -> None:
    assert shard_ids_for_index(1, "3,7,9-12", "2") == (9, 10)
    assert shard_ids_for_index(2, "3,7,9-12", "2") == (11, 12)
    assert shard_ids_for_index(0, "3,7", None) == (3,)
    env = ShardEnv.from_environ({**ENV, "AIRFLOW_KUEUE_SHARDS": "0-9", "AIRFLOW_KUEUE_SHARDS_PER_POD": "4"})
    assert (env.index, env.shard_id, env.shard_ids, env.packed) == (1, 4, (4, 5, 6, 7), True)
    runs = {**ENV, "AIRFLOW_KUEUE_SHARDS": "0-9", "AIRFLOW_KUEUE_SHARDS_PER_POD": "4x1,2x2,1x2"}
    assert [shard_ids_for_index(i, runs["AIRFLOW_KUEUE_SHARDS"], "4x1,2x2,1x2") for i in range(5)] == [
        (0, 1, 2, 3),
        (4, 5),
        (6, 7),
        (8,),
        (9,),
    ]
    decreasing = ShardEnv.from_environ(runs)
    assert (decreasing.shard_ids, decreasing.per_pod, decreasing.packed) == ((4, 5), 4, True)
    unpacked = ShardEnv.from_environ(ENV)
    assert (unpacked.shard_ids, unpacked.packed) == ((7,), False)


@pytest.mark.parametrize(
    ("index", "shards", "per_pod", "message"),
    [
        (3, "0-9", "4", "index 3 is out of range: 10 shards as 3 pods of up to 4"),
        (0, None, "4", "PER_POD=4 needs AIRFLOW_KUEUE_SHARDS"),
        (0, "0-9", "four", "'four': .*give a whole number of shards per pod, or decreasing runs"),
        (0, "0-9", "0", "'0': shards per pod must be a whole number >= 1"),
        (0, "0-9", "4x2,1x1", "hold 9 shards, not the Job's 10"),
        (5, "0-9", "4x2,1x2", "index 5 is out of range: 10 shards as 4 pods of 4 down to 1"),
    ],
)
def test_bad_packing_env_is_refused(index: int, shards: str | None, per_pod: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        shard_ids_for_index(index, shards, per_pod)


@pytest.mark.parametrize(
    ("cs", "url"),
    [
        (
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;"
            "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;",
            "http://127.0.0.1:10000/devstoreaccount1/ckpt",
        ),
        (
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5",
            "https://acct.blob.core.windows.net/ckpt",
        ),
    ],
)
def test_container_url_round_trips_through_the_worker(cs: str, url: str) -> None:
    hook = BlobStore.from_connection_string(cs, "ckpt")
    assert hook.container_url() == url
    account_url, container = split_checkpoint_url(url)
    assert container == "ckpt" and account_url.rstrip("/") == url.rsplit("/", 1)[0]
