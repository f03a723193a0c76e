"""A pod's SAS read from its mounted Secret: re-read when the kubelet swaps the file, and a request refused
with 403 waits for a newer SAS before the error stands (no network: the Blob call is a stand-in)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError

from airflow_kueue_provider.storage import sas_file
from airflow_kueue_provider.storage.blob_errors import BlobConfigError
from airflow_kueue_provider.storage.blob_store import BlobStore
from airflow_kueue_provider.storage.sas_file import FileSasCredential


def kubelet_writes(path: Path, token: str) -> None:
    """As the kubelet updates a mounted Secret: a new file swapped in atomically."""
    staged = path.with_suffix(".new")
    staged.write_text(token)
    os.replace(staged, path)


def later(seconds: float, path: Path, token: str) -> threading.Thread:
    def write() -> None:
        time.sleep(seconds)
        kubelet_writes(path, token)

    thread = threading.Thread(target=write)
    thread.start()
    return thread


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sas_file, "POLL_SECONDS", 0.02)
    monkeypatch.setattr(sas_file, "REFRESH_WAIT_SECONDS", 1.0)


def test_the_signature_follows_the_file(tmp_path: Path) -> None:
    path = tmp_path / "sas-token"
    kubelet_writes(path, "?sv=1&sig=first\n")
    credential = FileSasCredential(str(path))
    assert credential.signature == "sv=1&sig=first"
    kubelet_writes(path, "sv=1&sig=second")
    assert credential.signature == "sv=1&sig=second"
    path.unlink()
    assert credential.signature == "sv=1&sig=second", "mid-swap or gone: the last good one"


def test_an_unreadable_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(BlobConfigError, match="sas-token"):
        FileSasCredential(str(tmp_path / "sas-token"))
    (tmp_path / "empty").write_text("")
    with pytest.raises(BlobConfigError, match="empty"):
        FileSasCredential(str(tmp_path / "empty"))


def test_wait_for_new_returns_once_another_sas_is_there(tmp_path: Path) -> None:
    path = tmp_path / "sas-token"
    kubelet_writes(path, "sv=1&sig=old")
    credential = FileSasCredential(str(path))
    assert not credential.wait_for_new(0.1), "nothing new: gives up after the timeout"
    thread = later(0.1, path, "sv=1&sig=new")
    assert credential.wait_for_new(2.0) and credential.signature == "sv=1&sig=new"
    thread.join()


def _refused() -> HttpResponseError:
    exc = ClientAuthenticationError(message="AuthenticationFailed: Signed expiry time has passed")
    exc.status_code = 403
    return exc


def test_a_refused_request_waits_for_the_re_signed_sas_and_is_sent_again(tmp_path: Path) -> None:
    path = tmp_path / "sas-token"
    kubelet_writes(path, "sv=1&sig=expired")
    credential = FileSasCredential(str(path))
    store = BlobStore.from_sas_file("https://acct.blob.core.windows.net/", "ckpt-1", credential)
    seen: list[str] = []

    def op(kw: dict[str, Any]) -> str:
        seen.append(credential.signature)
        if credential.signature.endswith("expired"):
            raise _refused()
        return "ok"

    thread = later(0.1, path, "sv=1&sig=fresh")
    assert store._run("write x", op) == "ok"
    thread.join()
    assert seen[0] == "sv=1&sig=expired" and seen[-1] == "sv=1&sig=fresh"


def test_a_sas_refused_for_good_still_fails_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "sas-token"
    kubelet_writes(path, "sv=1&sig=a")
    credential = FileSasCredential(str(path))
    store = BlobStore.from_sas_file("https://acct.blob.core.windows.net/", "ckpt-1", credential)
    calls = 0

    def op(kw: dict[str, Any]) -> str:
        nonlocal calls
        calls += 1
        kubelet_writes(path, f"sv=1&sig={calls}")  # a new SAS each time, refused all the same
        raise _refused()

    with pytest.raises(BlobConfigError, match="authentication/authorization"):
        store._run("write x", op)
    assert calls == 3, "two new SAS at most, then the error stands"

    plain = BlobStore.from_sas("https://acct.blob.core.windows.net/", "ckpt-1", "sv=1&sig=a")
    started = time.monotonic()
    with pytest.raises(BlobConfigError):
        plain._run("write x", lambda kw: (_ for _ in ()).throw(_refused()))
    assert time.monotonic() - started < 0.5, "an env-var SAS has nothing to wait for"
