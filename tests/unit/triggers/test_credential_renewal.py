"""The trigger keeps a followed Job's pod SAS valid: it moves the stored access policy's window to now + TTL
every quarter of the TTL, retries Blob trouble, stops once the policy is gone, and does nothing without a
renewal (no checkpointing, workload identity, a user-delegation SAS, a trigger of an earlier version)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airflow_kueue_provider.kueue.checkpoints import checkpoint_access
from airflow_kueue_provider.kueue.checkpoints.checkpoint_access import CredentialRenewal
from airflow_kueue_provider.triggers.credential_renewal import renewing
from airflow_kueue_provider.triggers.kueue_job import KueueJobTrigger

PREVIOUS = Path(__file__).parents[2] / "integration" / "triggers" / "previous_main"
RENEWAL = CredentialRenewal("blob", "checkpoints", "checkpoints-abc", "0123abcd", ttl_seconds=0.4)


@pytest.fixture(autouse=True)
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint_access, "MIN_RENEWAL_SECONDS", 0.01)


def test_the_renewal_crosses_the_boundary_as_a_dict() -> None:
    assert CredentialRenewal.from_dict(json.loads(json.dumps(RENEWAL.to_dict()))) == RENEWAL
    assert RENEWAL.every_seconds == pytest.approx(0.1)


def test_each_quarter_of_the_ttl_the_window_moves_to_now_plus_ttl() -> None:
    calls: list[tuple[CredentialRenewal, datetime, datetime]] = []

    def extend(renewal: CredentialRenewal, start: datetime, expiry: datetime) -> int:
        calls.append((renewal, start, expiry))
        return 1

    async def follow() -> None:
        async with renewing(RENEWAL.to_dict(), "Job ns/a", extend):
            await asyncio.sleep(0.35)

    asyncio.run(follow())
    assert 2 <= len(calls) <= 4
    now = datetime.now(UTC)
    renewal, start, expiry = calls[-1]
    assert renewal == RENEWAL
    assert start < now - timedelta(minutes=4)  # the clock-skew allowance
    assert now - timedelta(seconds=1) < expiry <= now + timedelta(seconds=0.4)


def test_blob_trouble_is_retried_and_a_gone_policy_ends_the_renewal() -> None:
    answers: list[int | Exception] = [OSError("Blob away"), 1, 0]
    calls = 0

    def extend(renewal: CredentialRenewal, start: datetime, expiry: datetime) -> int:
        nonlocal calls
        calls += 1
        answer = answers.pop(0) if answers else 1
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def follow() -> None:
        async with renewing(RENEWAL.to_dict(), "Job ns/a", extend):
            await asyncio.sleep(1.0)

    asyncio.run(follow())
    assert calls == 3  # failed, renewed, then no policy left: no more calls


def test_without_a_renewal_nothing_runs() -> None:
    def extend(renewal: CredentialRenewal, start: datetime, expiry: datetime) -> int:
        raise AssertionError("must not renew")

    async def follow() -> None:
        async with renewing(None, "Job ns/a", extend):
            await asyncio.sleep(0.05)

    asyncio.run(follow())


def test_the_trigger_carries_its_renewal_and_an_earlier_versions_trigger_has_none() -> None:
    _, kwargs = json.loads((PREVIOUS / "job_ramp_deadline_ledger.json").read_text())
    earlier = KueueJobTrigger(**kwargs)
    assert earlier.credential is None and "credential" not in earlier.serialize()[1]
    _, again = KueueJobTrigger(**{**kwargs, "credential": RENEWAL.to_dict()}).serialize()
    assert CredentialRenewal.from_dict(again["credential"]) == RENEWAL


RESIGN = CredentialRenewal(
    "blob",
    "checkpoints",
    "checkpoints-abc",
    "",
    0.4,
    True,
    "batch",
    "job-1-checkpoint-0123456789abcdef",
    "u-1",
)


def test_a_user_delegation_sas_is_re_signed_into_the_secret_at_once_and_each_quarter() -> None:
    signed: list[tuple[datetime, datetime]] = []
    written: list[tuple[CredentialRenewal, str]] = []

    def sign(renewal: CredentialRenewal, start: datetime, expiry: datetime) -> str:
        signed.append((start, expiry))
        return f"sv=x&se={expiry.isoformat()}&sig={len(signed)}"

    async def replace(renewal: CredentialRenewal, token: str) -> bool:
        written.append((renewal, token))
        return True

    def extend(renewal: CredentialRenewal, start: datetime, expiry: datetime) -> int:
        raise AssertionError("a user-delegation SAS has no stored policy to extend")

    async def follow() -> None:
        async with renewing(RESIGN.to_dict(), "Job batch/job-1", extend, sign=sign, replace=replace):
            await asyncio.sleep(0.05)
            assert len(written) == 1, "a resumed trigger writes a fresh SAS first"
            await asyncio.sleep(0.3)

    asyncio.run(follow())
    assert 3 <= len(written) <= 5
    assert [t for _, t in written] == [
        f"sv=x&se={e.isoformat()}&sig={i}" for i, (_, e) in enumerate(signed, 1)
    ]
    assert all(r == RESIGN for r, _ in written)
    now = datetime.now(UTC)
    assert now - timedelta(seconds=1) < signed[-1][1] <= now + timedelta(seconds=0.4)


def test_a_secret_gone_or_not_the_jobs_ends_the_re_signing() -> None:
    answers = [True, False]

    async def replace(renewal: CredentialRenewal, token: str) -> bool:
        return answers.pop(0) if answers else True

    async def follow() -> None:
        async with renewing(RESIGN.to_dict(), "Job batch/job-1", sign=lambda *a: "sv=x", replace=replace):
            await asyncio.sleep(0.5)

    asyncio.run(follow())
    assert answers == [], "stopped after the refused write"


def test_a_renewal_of_the_previous_version_is_policy_bound() -> None:
    old = {
        k: v
        for k, v in RENEWAL.to_dict().items()
        if k in ("conn_id", "container", "shard_container", "policy_head", "ttl_seconds")
    }
    assert CredentialRenewal.from_dict(old) == RENEWAL and not RENEWAL.resign
    assert CredentialRenewal.from_dict(json.loads(json.dumps(RESIGN.to_dict()))) == RESIGN
    with pytest.raises(ValueError, match="namespace, name and owner uid"):
        CredentialRenewal("blob", "c", "c-1", "", 60, True)
