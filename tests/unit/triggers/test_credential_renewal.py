"""The trigger keeps a followed Job's pod SAS valid: it moves the stored access policy's window to now + TTL
every quarter of the TTL, retries Blob trouble, stops once the policy is gone, and does nothing without a
renewal (no checkpointing, workload identity, a user-delegation SAS, a trigger of an earlier version)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest

from airflow_kueue_provider.kueue.checkpoints import checkpoint_access
from airflow_kueue_provider.kueue.checkpoints.checkpoint_access import CLOCK_SKEW, CredentialRenewal
from airflow_kueue_provider.triggers.credential_renewal import renewing
from airflow_kueue_provider.triggers.kueue_job import KueueJobTrigger

PREVIOUS = Path(__file__).parents[2] / "integration" / "triggers" / "previous_main"
RENEWAL = CredentialRenewal("blob", "checkpoints", "checkpoints-abc", "0123abcd", ttl_seconds=0.4)


async def _until(done: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait for ``done`` (a loaded CI runner may be slow to run the renewal's worker thread)."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the renewal did not happen in time"
        await asyncio.sleep(0.01)


def _advancing(expiries: list[datetime]) -> bool:
    """Each renewal's window ends later than the last. "now + TTL" itself is checked inside the call only as
    "never later": the call runs in a worker thread, which on a starved runner (the unit lanes run at nice 19
    beside the bed) can start well after the window was computed."""
    return all(a < b for a, b in pairwise(expiries))


def _spacing(at: list[float]) -> float:
    return min(b - a for a, b in pairwise(at))


@pytest.fixture(autouse=True)
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint_access, "MIN_RENEWAL_SECONDS", 0.01)


def test_the_renewal_crosses_the_boundary_as_a_dict() -> None:
    assert CredentialRenewal.from_dict(json.loads(json.dumps(RENEWAL.to_dict()))) == RENEWAL
    assert RENEWAL.every_seconds == pytest.approx(0.1)


def test_each_quarter_of_the_ttl_the_window_moves_to_now_plus_ttl() -> None:
    calls: list[tuple[CredentialRenewal, datetime, datetime]] = []
    at: list[float] = []

    def extend(renewal: CredentialRenewal, start: datetime, expiry: datetime) -> int:
        calls.append((renewal, start, expiry))
        at.append(time.monotonic())
        assert expiry - datetime.now(UTC) <= timedelta(seconds=0.4), "now + TTL, never later"
        return 1

    async def follow() -> None:
        began = time.monotonic()
        async with renewing(RENEWAL.to_dict(), "Job ns/a", extend):
            await _until(lambda: len(calls) >= 3)
        assert at[0] - began >= 0.09, "a policy-bound SAS is first renewed a quarter of its TTL later"

    asyncio.run(follow())
    assert _spacing(at) >= 0.09, "never more often than a quarter of the TTL"
    assert _advancing([expiry for _, _, expiry in calls])
    renewal, start, expiry = calls[-1]
    assert renewal == RENEWAL
    assert expiry - start == CLOCK_SKEW + timedelta(seconds=0.4)  # starts early by the clock-skew allowance


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
            await _until(lambda: calls >= 3)
            await asyncio.sleep(0.4)

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
    at: list[float] = []

    def sign(renewal: CredentialRenewal, start: datetime, expiry: datetime) -> str:
        signed.append((start, expiry))
        assert expiry - datetime.now(UTC) <= timedelta(seconds=0.4), "now + TTL, never later"
        return f"sv=x&se={expiry.isoformat()}&sig={len(signed)}"

    async def replace(renewal: CredentialRenewal, token: str) -> bool:
        written.append((renewal, token))
        at.append(time.monotonic())
        return True

    def extend(renewal: CredentialRenewal, start: datetime, expiry: datetime) -> int:
        raise AssertionError("a user-delegation SAS has no stored policy to extend")

    async def follow() -> None:
        async with renewing(RESIGN.to_dict(), "Job batch/job-1", extend, sign=sign, replace=replace):
            await _until(lambda: len(written) >= 1)
            assert len(written) == 1, "a resumed trigger writes a fresh SAS first, then waits a quarter"
            await _until(lambda: len(written) >= 3)

    asyncio.run(follow())
    assert _spacing(at) >= 0.09, "never more often than a quarter of the TTL"
    assert [t for _, t in written] == [
        f"sv=x&se={e.isoformat()}&sig={i}" for i, (_, e) in enumerate(signed, 1)
    ]
    assert all(r == RESIGN for r, _ in written)
    assert all(e - s == CLOCK_SKEW + timedelta(seconds=0.4) for s, e in signed)
    assert _advancing([e for _, e in signed])


def test_a_secret_gone_or_not_the_jobs_ends_the_re_signing() -> None:
    answers = [True, False]
    writes = 0

    async def replace(renewal: CredentialRenewal, token: str) -> bool:
        nonlocal writes
        writes += 1
        return answers.pop(0) if answers else True

    async def follow() -> None:
        async with renewing(RESIGN.to_dict(), "Job batch/job-1", sign=lambda *a: "sv=x", replace=replace):
            await _until(lambda: not answers)
            await asyncio.sleep(0.4)

    asyncio.run(follow())
    assert writes == 2, "stopped after the refused write"


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
