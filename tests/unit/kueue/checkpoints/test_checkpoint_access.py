"""Shard containers and pod credential windows (pure)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_kueue_provider.kueue.checkpoints.checkpoint_access import (
    CLOCK_SKEW,
    access_policy_head,
    access_policy_id,
    credential_window,
    is_container_name,
    is_shard_container_of,
    policies_to_keep,
    sas_secret_name,
    shard_container_name,
)
from airflow_kueue_provider.kueue.checkpoints.ledger import ledger_prefix

ids = st.text(min_size=1, max_size=300)
bases = st.from_regex(r"[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}", fullmatch=True)


@given(
    bases, st.tuples(ids, ids, ids, st.integers(-1, 5000)), st.tuples(ids, ids, ids, st.integers(-1, 5000))
)
def test_two_task_instances_never_share_a_shard_container(
    base: str, one: tuple[str, str, str, int], other: tuple[str, str, str, int]
) -> None:
    first, second = (
        shard_container_name(base, ledger_prefix(*one)),
        shard_container_name(base, ledger_prefix(*other)),
    )
    assert is_container_name(first) and is_container_name(second)
    assert is_shard_container_of(base, first, ledger_prefix(*one))
    assert (first == second) == (ledger_prefix(*one) == ledger_prefix(*other))
    assert first != base, "checkpoints never share the ledgers' container"


def test_a_long_base_is_cut_to_fit_azures_63_characters() -> None:
    name = shard_container_name("a" * 40 + "-" + "b" * 22, "d/r/t")
    assert len(name) == 63 and is_container_name(name)
    assert not is_shard_container_of("other", name, "d/r/t")


def test_two_bases_sharing_their_first_30_characters_never_share_a_shard_container() -> None:
    head = "a" * 30
    one, other = head + "-one", head + "-two"
    assert shard_container_name(one, "d/r/t") != shard_container_name(other, "d/r/t")
    assert is_shard_container_of(one, shard_container_name(one, "d/r/t"), "d/r/t")
    assert not is_shard_container_of(other, shard_container_name(one, "d/r/t"), "d/r/t")


def test_the_sas_secret_name_is_the_job_and_a_random_access_id() -> None:
    assert sas_secret_name("job-1", "0123456789abcdef") == "job-1-checkpoint-0123456789abcdef"
    for bad in ("", "0123", "0123456789ABCDEF", "job-1-checkpoint"):
        with pytest.raises(ValueError, match="access_id"):
            sas_secret_name("job-1", bad)


def test_a_jobsets_sas_secret_name_says_its_kind_so_no_namesake_of_the_other_kind_owns_it() -> None:
    """Admission binds a checkpoint Secret to the object it is named after (deploy/policy); a Job and a JobSet
    may share a name, so the kind is in the Secret's name and no Job's form is a JobSet's."""
    access = "0123456789abcdef"
    assert sas_secret_name("genomics", access, "JobSet") == "genomics-checkpoint-jobset-0123456789abcdef"
    jobset_secret = sas_secret_name("genomics", access, "JobSet")
    assert jobset_secret != sas_secret_name("genomics", access)
    # A Job would own it only under a name that ends in the JobSet's marker: never a provider Job's name.
    for job_name in ("genomics", "genomics-checkpoint", "genomics-checkpoint-jobset"):
        assert sas_secret_name(job_name, access) != jobset_secret
    with pytest.raises(ValueError, match="owner_kind"):
        sas_secret_name("genomics", access, "Pod")


def test_access_policy_ids_start_with_their_jobs_head_and_fit_azures_64() -> None:
    pid = access_policy_id("job-1", "0123456789abcdef")
    assert pid.startswith(access_policy_head("job-1")) and len(pid) <= 64
    assert not access_policy_id("job-2", "0123456789abcdef").startswith(access_policy_head("job-1"))


def test_adding_a_policy_drops_expired_ones_and_keeps_at_most_four() -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    expiries = {f"p{i}": now + timedelta(hours=i) for i in range(-1, 6)}
    assert policies_to_keep(expiries, now) == ["p2", "p3", "p4", "p5"]
    assert policies_to_keep({"a": now - timedelta(seconds=1)}, now) == []
    assert policies_to_keep({}, now) == []
    fewer = {f"p{i}": now + timedelta(hours=i) for i in range(1, 4)}
    assert policies_to_keep(fewer, now) == ["p1", "p2", "p3"], "room for one more: all stay"


@pytest.mark.parametrize("bad", ["ab", "A-b-c", "a--b", "-abc", "abc-", "a_b_c", "a" * 64])
def test_invalid_base_containers_are_refused(bad: str) -> None:
    assert not is_container_name(bad)
    with pytest.raises(ValueError, match="not a valid Blob container name"):
        shard_container_name(bad, "d/r/t")


def test_the_credential_window_starts_early_and_is_bounded() -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    assert credential_window(now, timedelta(hours=48)) == (now - CLOCK_SKEW, now + timedelta(hours=48))
    for ttl in (timedelta(0), timedelta(days=7, seconds=1)):
        with pytest.raises(ValueError, match="credential_ttl"):
            credential_window(now, ttl)


def test_a_salt_gives_a_task_instance_a_new_container_name_and_no_salt_the_old_one() -> None:
    """A container re-created under a new ledger (new salt) has a new name: a SAS signs its container's
    name, so one signed for the old container opens nothing there. Unsalted names are those of before."""
    base, prefix = "ckpt", "d/r/t"
    one, other = "0" * 32, "1" * 32
    unsalted = shard_container_name(base, prefix)
    assert unsalted == "ckpt-" + hashlib.sha256(b"ckpt\nd/r/t").hexdigest()[:32], "old containers still found"
    salted = shard_container_name(base, prefix, one)
    assert len({unsalted, salted, shard_container_name(base, prefix, other)}) == 3
    assert is_container_name(salted) and salted.startswith("ckpt-")
    assert is_shard_container_of(base, salted, prefix, one)
    assert not is_shard_container_of(base, salted, prefix, other) and not is_shard_container_of(
        base, salted, prefix
    )
    assert is_shard_container_of(base, unsalted, prefix) and not is_shard_container_of(
        base, unsalted, prefix, one
    )
    assert not is_shard_container_of(base, salted, prefix, "not-a-salt"), "bad metadata matches nothing"
    with pytest.raises(ValueError, match="salt='X' must be 32 lowercase hex"):
        shard_container_name(base, prefix, "X")
