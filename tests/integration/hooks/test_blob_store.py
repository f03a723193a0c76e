"""BlobStoreHook / AsyncBlobStoreHook against Azurite: ETag-conditional writes, check() errors, outages."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.storage.blob import ContainerSasPermissions, generate_container_sas

from airflow_kueue_provider.hooks.blob_store import (
    AsyncBlobStoreHook,
    BlobConfigError,
    BlobPreconditionFailed,
    BlobStoreHook,
    BlobUnavailable,
    RetryPolicy,
)

CONN_ID = "kueue_blob_test"
FAST = RetryPolicy(attempts=3, base_delay=0.05, max_delay=0.2, request_timeout=2.0)


def _parts(cs: str) -> dict[str, str]:
    return {k: v for k, _, v in (p.partition("=") for p in cs.split(";") if p)}


@pytest.fixture
def cs(devcluster_env: dict[str, str]) -> str:
    return devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]


@pytest.fixture
def conn(cs: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The Blob connection as Airflow reads it from AIRFLOW_CONN_<ID> (no metadata DB)."""
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CONN_ID.upper()}",
        json.dumps({"conn_type": "wasb", "extra": {"connection_string": cs}}),
    )
    return CONN_ID


@pytest.fixture
def container(cs: str) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:16]}"
    yield name
    with BlobStoreHook.from_connection_string(cs, name) as hook:
        if hook.get_conn().exists():
            hook.get_conn().delete_container()


def test_json_round_trip_list_and_delete(conn: str, container: str) -> None:
    with BlobStoreHook(conn, container) as hook:
        hook.check()  # creates the container
        assert hook.read_json("a/missing.json") == (None, None)
        etag = hook.write_json("a/doc.json", {"n": 1})
        assert hook.read_json("a/doc.json") == ({"n": 1}, etag)
        for i in range(3):
            hook.write_json(f"a/x/{i}.json", {"i": i})
        names = hook.list_names("a/x/")
        assert [n for n, _ in names] == ["a/x/0.json", "a/x/1.json", "a/x/2.json"]
        assert all(isinstance(t, datetime) for _, t in names)
        assert hook.delete("a/doc.json") and not hook.delete("a/doc.json")
        assert hook.delete_prefix("a/") == 3 and hook.list_names("a/") == []


def test_conditional_writes(conn: str, container: str) -> None:
    with BlobStoreHook(conn, container) as hook:
        first = hook.write_json("doc.json", {"v": 1}, if_none_match=True)
        with pytest.raises(BlobPreconditionFailed):
            hook.write_json("doc.json", {"v": 2}, if_none_match=True)
        _, seen = hook.read_json("doc.json")
        assert seen == first
        hook.write_json("doc.json", {"v": 2}, if_match=seen)  # someone else wins the race...
        with pytest.raises(BlobPreconditionFailed):
            hook.write_json("doc.json", {"v": 3}, if_match=seen)  # ...so our stale write is refused
        assert hook.read_json("doc.json")[0] == {"v": 2}


def _increment(hook: BlobStoreHook, writer: str) -> int:
    """Read-modify-write with retry on a lost race; returns how many races were lost."""
    lost = 0
    while True:
        doc, etag = hook.read_json("counter.json")
        doc = doc or {"count": 0, "by": {}}
        doc["count"] += 1
        doc["by"][writer] = doc["by"].get(writer, 0) + 1
        try:
            hook.write_json("counter.json", doc, if_match=etag, if_none_match=etag is None)
            return lost
        except BlobPreconditionFailed:
            lost += 1


def test_two_concurrent_writers_lose_no_update(conn: str, container: str) -> None:
    rounds, start, lost = 25, threading.Barrier(2), []

    def writer(name: str) -> None:
        with BlobStoreHook(conn, container) as hook:
            start.wait()
            lost.append(sum(_increment(hook, name) for _ in range(rounds)))

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    with BlobStoreHook(conn, container) as hook:
        doc, _ = hook.read_json("counter.json")
    assert doc == {"count": 2 * rounds, "by": {"a": rounds, "b": rounds}}, f"lost races: {lost}"
    print(f"races lost and retried: {lost}")


def test_two_concurrent_async_writers_lose_no_update(conn: str, container: str) -> None:
    rounds = 20

    async def increment(hook: AsyncBlobStoreHook, writer: str) -> None:
        for _ in range(rounds):
            while True:
                doc, etag = await hook.read_json("counter.json")
                doc = doc or {"count": 0, "by": {}}
                doc["count"] += 1
                doc["by"][writer] = doc["by"].get(writer, 0) + 1
                try:
                    await hook.write_json("counter.json", doc, if_match=etag, if_none_match=etag is None)
                    break
                except BlobPreconditionFailed:
                    continue

    async def main() -> dict[str, object] | None:
        async with AsyncBlobStoreHook(conn, container) as a, AsyncBlobStoreHook(conn, container) as b:
            await a.check()
            await asyncio.gather(increment(a, "a"), increment(b, "b"))
            doc, _ = await a.read_json("counter.json")
            return doc

    assert asyncio.run(main()) == {"count": 2 * rounds, "by": {"a": rounds, "b": rounds}}
    with BlobStoreHook(conn, container) as hook:
        assert [n for n, _ in hook.list_names("")] == ["counter.json"]
        assert hook.delete_prefix("counter") == 1


# -- check() -----------------------------------------------------------------------------------------------


def test_unknown_connection() -> None:
    with pytest.raises(
        BlobConfigError, match=r"'kueue_blob_nowhere' is not defined.*AIRFLOW_CONN_KUEUE_BLOB_NOWHERE"
    ):
        BlobStoreHook("kueue_blob_nowhere").check()
    with pytest.raises(BlobConfigError, match="is not defined"):
        asyncio.run(AsyncBlobStoreHook("kueue_blob_nowhere").check())


def test_connection_without_usable_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_KUEUE_BLOB_EMPTY", json.dumps({"conn_type": "wasb"}))
    with pytest.raises(BlobConfigError, match="no usable fields"):
        BlobStoreHook("kueue_blob_empty").check()


def test_missing_container_with_create_disabled(conn: str, container: str) -> None:
    with pytest.raises(
        BlobConfigError, match=f"container '{container}' does not exist.*create_container=True"
    ):
        BlobStoreHook(conn, container, create_container=False).check()

    async def async_check() -> None:
        async with AsyncBlobStoreHook(conn, container, create_container=False) as hook:
            await hook.check()

    with pytest.raises(BlobConfigError, match="does not exist"):
        asyncio.run(async_check())
    BlobStoreHook(conn, container).check()  # create allowed: it is made...
    BlobStoreHook(conn, container, create_container=False).check()  # ...and then found


def test_bad_account_key(cs: str, container: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real = _parts(cs)["AccountKey"]
    wrong = base64.b64encode(b"not the devstoreaccount1 key, 64 bytes long..............").decode()
    bad_cs = cs.replace(real, wrong)
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUEUE_BLOB_BAD",
        json.dumps({"conn_type": "wasb", "extra": {"connection_string": bad_cs}}),
    )
    for hook in (
        BlobStoreHook("kueue_blob_bad", container),
        BlobStoreHook.from_connection_string(bad_cs, container),
    ):
        with pytest.raises(
            BlobConfigError, match=r"authentication/authorization .* failed .*account key"
        ) as info:
            hook.check()
        assert wrong not in str(info.value) and real not in str(info.value)


def test_wasb_style_shared_key_and_sas_fields(
    cs: str, container: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = _parts(cs)
    endpoint = parts["BlobEndpoint"]
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUEUE_BLOB_KEY",
        json.dumps(
            {
                "conn_type": "wasb",
                "host": endpoint,
                "login": parts["AccountName"],
                "password": parts["AccountKey"],
            }
        ),
    )
    BlobStoreHook("kueue_blob_key", container).check()
    sas = generate_container_sas(
        parts["AccountName"],
        container,
        account_key=parts["AccountKey"],
        permission=ContainerSasPermissions(read=True, write=True, list=True, delete=True),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUEUE_BLOB_SAS",
        json.dumps({"conn_type": "wasb", "host": endpoint, "extra": {"sas_token": sas}}),
    )
    with BlobStoreHook("kueue_blob_sas", container) as hook:
        hook.write_json("via-sas.json", {"ok": True})
        assert hook.read_json("via-sas.json")[0] == {"ok": True}
        assert hook.container_url() == f"{endpoint.rstrip('/')}/{container}"
    forged = sas.replace("sig=", "sig=AAAA")
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUEUE_BLOB_SAS",
        json.dumps({"conn_type": "wasb", "host": endpoint, "extra": {"sas_token": forged}}),
    )
    with pytest.raises(BlobConfigError, match="SAS token") as info:
        BlobStoreHook("kueue_blob_sas", container).write_json("x.json", {})
    signature = forged.split("sig=")[1].split("&")[0]
    assert signature not in str(info.value)


# -- outages -----------------------------------------------------------------------------------------------


def _unreachable(monkeypatch: pytest.MonkeyPatch, cs: str, port: int) -> str:
    parts = _parts(cs)
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUEUE_BLOB_DOWN",
        json.dumps(
            {
                "conn_type": "wasb",
                "host": f"http://127.0.0.1:{port}/devstoreaccount1",
                "login": "devstoreaccount1",
                "password": parts["AccountKey"],
            }
        ),
    )
    return "kueue_blob_down"


def test_refused_connection_is_unavailable_after_retries_fast(
    cs: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn_id = _unreachable(monkeypatch, cs, 1)
    hook = BlobStoreHook(conn_id, "anything", retry=FAST)
    started = time.monotonic()
    with pytest.raises(BlobUnavailable, match="unavailable after 3 attempt"):
        hook.check()
    with pytest.raises(BlobUnavailable):
        hook.write_json("x.json", {"a": 1})
    assert time.monotonic() - started < 3.0

    async def async_write() -> None:
        async with AsyncBlobStoreHook(conn_id, "anything", retry=FAST) as a:
            await a.write_json("x.json", {"a": 1})

    started = time.monotonic()
    with pytest.raises(BlobUnavailable, match="after 3 attempt"):
        asyncio.run(async_write())
    assert time.monotonic() - started < 2.0


def test_a_server_that_never_answers_times_out_within_the_budget(
    cs: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as black_hole:  # accepts connections (kernel backlog) but never replies
        black_hole.bind(("127.0.0.1", 0))
        black_hole.listen(16)
        conn_id = _unreachable(monkeypatch, cs, black_hole.getsockname()[1])
        hook = BlobStoreHook(
            conn_id, "anything", retry=RetryPolicy(attempts=50, base_delay=0.05, request_timeout=5.0)
        )
        started = time.monotonic()
        with pytest.raises(BlobUnavailable):
            hook.write_json("x.json", {"a": 1}, timeout=1.0)  # the budget wins over 50 attempts x 5 s
        assert time.monotonic() - started < 2.0


def test_a_policy_bound_sas_is_refreshed_revoked_and_at_most_five_policies_stay(
    conn: str, container: str, cs: str
) -> None:
    """The pods' SAS on account-key auth (hooks.blob_containers): valid through its stored access policy,
    extended in place, dead the moment the policy goes; the oldest attempts' policies make room."""
    from azure.core.exceptions import HttpResponseError
    from azure.storage.blob import ContainerClient

    from airflow_kueue_provider.hooks.blob_containers import BlobAccountHook

    account_url = cs.split("BlobEndpoint=")[1].split(";")[0]
    with BlobAccountHook(conn, container) as hook:
        hook.check()
        assert hook.binds_sas_to_policy
        now = datetime.now(UTC)
        token = hook.container_sas(container, now - timedelta(minutes=5), now + timedelta(hours=1), "job-a-1")
        assert "si=job-a-1" in token and "se=" not in token
        pod = ContainerClient(account_url, container, credential=token)
        pod.upload_blob("d/r/t/shards/0/a.json", b"{}")

        assert hook.extend_access(container, "job-a", now, now + timedelta(days=2)) == 1
        assert hook._policies(container)["job-a-1"].expiry.startswith(  # type: ignore[union-attr]
            (now + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
        )
        pod.upload_blob("d/r/t/shards/0/b.json", b"{}")  # the same token, still valid

        tokens = {}
        for n in range(2, 8):  # six more attempts: the oldest policies make room (Azure allows 5)
            later = now + timedelta(hours=1, minutes=n)
            tokens[n] = hook.container_sas(container, now, later, f"job-{n}")
        assert sorted(hook._policies(container)) == ["job-4", "job-5", "job-6", "job-7", "job-a-1"], (
            "those expiring last stay (job-a-1 was extended)"
        )
        pod.upload_blob("d/r/t/shards/0/c.json", b"{}")
        with pytest.raises(HttpResponseError) as refused:
            ContainerClient(account_url, container, credential=tokens[2]).upload_blob("x/shards/0/c", b"{}")
        assert refused.value.status_code == 403, "a dropped policy's SAS is refused"

        last = ContainerClient(
            account_url, container, credential=hook.container_sas(container, now, later, "job-8")
        )
        last.upload_blob("d/r/t/shards/0/d.json", b"{}")
        assert hook.revoke_access(container, "job-8") == 1
        with pytest.raises(HttpResponseError) as revoked:
            last.upload_blob("d/r/t/shards/0/e.json", b"{}")
        assert revoked.value.status_code == 403, "revoked at the attempt's end: refused at once"
