"""Small JSON documents in Azure Blob Storage, synchronously: ``BlobStore`` (the async twin is
``async_blob_store``; settings and constructors are ``blob_store_base``'s).

The worker SDK uses it as it is in a shard's container; the Airflow hooks (``hooks.blob_store``) add the
lookup of an Airflow connection.

The Azure SDK's own retries are switched off (``retry_total=0``): the store retries transient faults itself
with capped exponential backoff, so a caller decides how long a call may block (``RetryPolicy.attempts``, or a
``timeout`` budget on writes) and gets :class:`BlobUnavailable` when the budget is spent.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import ContainerClient

from ..kueue.checkpoints.checkpoint_retention import BlobInfo
from .blob_auth import BlobAuth, container_url_of, credential_for
from .blob_requests import BATCH_SIZE, JSON_CONTENT, batch_deleted, dumps, loads, write_conditions
from .blob_retry import _Attempts
from .blob_store_base import BlobStoreBase
from .sas_file import new_sas_after

if TYPE_CHECKING:
    from types import TracebackType

T = TypeVar("T")
S = TypeVar("S", bound="BlobStore")


class BlobStore(BlobStoreBase):
    """Synchronous JSON documents in one container; see the module docstring for connections and retries."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client: ContainerClient | None = None
        self._building = threading.Lock()  # a shard pack uses one store from three threads

    def __enter__(self: S) -> S:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def get_auth(self) -> BlobAuth:
        if self._auth is None:
            raise self._no_auth()
        return self._auth

    def container_url(self) -> str:
        """``<account URL>/<container>``: what pods get as ``AIRFLOW_KUEUE_CHECKPOINT_URL`` (no secrets)."""
        return container_url_of(self.get_auth(), self.container)

    def get_conn(self) -> ContainerClient:
        """The container client (built once, by one thread; building does no I/O)."""
        with self._building:
            if self._client is None:
                self._client = self._build()
            return self._client

    def _build(self) -> ContainerClient:
        auth = self.get_auth()
        if auth.kind == "connection_string":
            assert auth.connection_string is not None
            return ContainerClient.from_connection_string(
                auth.connection_string, self.container, retry_total=0
            )
        credential = credential_for(auth, aio=False)
        return ContainerClient(auth.account_url, self.container, credential, retry_total=0)

    def _run(self, what: str, op: Callable[[dict[str, Any]], T], budget: float | None = None) -> T:
        attempts = _Attempts(self.retry, what, self.where, budget)
        renewals = 0
        while True:
            try:
                return op(attempts.request_kwargs())
            except Exception as exc:
                credential = self._auth.credential if self._auth is not None else None
                if new_sas_after(exc, credential, attempts.deadline, renewals, what):
                    renewals += 1
                    continue
                time.sleep(attempts.failed(exc))

    def check(self) -> None:
        """Fail fast with :class:`BlobConfigError` (or :class:`BlobUnavailable`); create the container
        when ``create_container`` (else a missing container is an error)."""
        client = self.get_conn()

        def op(kw: dict[str, Any]) -> bool:
            try:
                client.get_container_properties(**kw)
                return True
            except ResourceNotFoundError:
                if not self.create_container:
                    return False
            with contextlib.suppress(ResourceExistsError):
                client.create_container(**kw)
            return True

        if not self._run("check", op):
            raise self._missing_container()

    def read_json(self, name: str) -> tuple[dict[str, Any] | None, str | None]:
        """``(document, etag)``, or ``(None, None)`` when the blob (or its container) does not exist."""
        blob = self.get_conn().get_blob_client(name)

        def op(kw: dict[str, Any]) -> tuple[bytes, str] | None:
            try:
                download = blob.download_blob(**kw)
                return download.readall(), download.properties.etag
            except ResourceNotFoundError:
                return None

        found = self._run(f"read {name}", op)
        return (None, None) if found is None else (loads(found[0], name), found[1])

    def write_json(
        self,
        name: str,
        data: Mapping[str, Any],
        *,
        if_match: str | None = None,
        if_none_match: bool = False,
        timeout: float | None = None,
    ) -> str:
        """Upload ``data`` in one request and return the new ETag.

        ``if_match``: only if the blob still has this ETag; ``if_none_match``: only if it does not exist yet.
        Either failing raises :class:`BlobPreconditionFailed`. ``timeout`` bounds the whole call (retries
        included). A retried write whose first attempt landed may report a precondition failure: make the
        read-modify-write idempotent.
        """
        body, conditions = dumps(data), write_conditions(if_match, if_none_match)
        blob = self.get_conn().get_blob_client(name)

        def op(kw: dict[str, Any]) -> str:
            try:
                return str(blob.upload_blob(body, content_settings=JSON_CONTENT, **conditions, **kw)["etag"])
            except ResourceNotFoundError as exc:
                if getattr(exc, "error_code", None) != "ContainerNotFound" or not self.create_container:
                    raise
            with contextlib.suppress(ResourceExistsError):
                self.get_conn().create_container(**kw)
            return str(blob.upload_blob(body, content_settings=JSON_CONTENT, **conditions, **kw)["etag"])

        return self._run(f"write {name}", op, timeout)

    def list_names(self, prefix: str) -> list[tuple[str, datetime]]:
        """``(name, last_modified)`` of every blob whose name starts with ``prefix``."""
        client = self.get_conn()

        def op(kw: dict[str, Any]) -> list[tuple[str, datetime]]:
            try:
                return [(b.name, b.last_modified) for b in client.list_blobs(name_starts_with=prefix, **kw)]
            except ResourceNotFoundError:
                return []

        return self._run(f"list {prefix}", op)

    def delete(self, name: str) -> bool:
        """Delete one blob; False if it did not exist."""
        blob = self.get_conn().get_blob_client(name)

        def op(kw: dict[str, Any]) -> bool:
            try:
                blob.delete_blob(**kw)
                return True
            except ResourceNotFoundError:
                return False

        return self._run(f"delete {name}", op)

    def list_blobs(self, prefix: str) -> list[BlobInfo]:
        """Name, last-modified time and ETag of every blob whose name starts with ``prefix``."""
        client = self.get_conn()

        def op(kw: dict[str, Any]) -> list[BlobInfo]:
            try:
                return [
                    BlobInfo(b.name, b.last_modified, b.etag)
                    for b in client.list_blobs(name_starts_with=prefix, **kw)
                ]
            except ResourceNotFoundError:
                return []

        return self._run(f"list {prefix}", op)

    def delete_unchanged(self, blobs: Sequence[BlobInfo]) -> tuple[list[str], list[str]]:
        """Delete each blob only if its ETag is still the one listed (256 per batch request).

        Returns (deleted, kept): a blob written again since the listing is kept (412), one already gone
        counts as neither."""
        client = self.get_conn()
        deleted: list[str] = []
        kept: list[str] = []
        for start in range(0, len(blobs), BATCH_SIZE):
            chunk = blobs[start : start + BATCH_SIZE]
            conditioned = [
                {"name": b.name, "etag": b.etag, "match_condition": MatchConditions.IfNotModified}
                for b in chunk
            ]

            def op(kw: dict[str, Any], conditioned: list[dict[str, Any]] = conditioned) -> list[int]:
                responses = client.delete_blobs(*conditioned, raise_on_any_failure=False, **kw)
                statuses = [r.status_code for r in responses]
                batch_deleted([s for s in statuses if s != 412], "delete unchanged blobs")
                return statuses

            for blob, status in zip(chunk, self._run("delete unchanged blobs", op), strict=True):
                (deleted if status == 202 else kept if status == 412 else []).append(blob.name)
        return deleted, kept

    def delete_prefix(self, prefix: str) -> int:
        """Delete every blob under a non-empty ``prefix`` (256 per batch request); returns how many went."""
        if not prefix:
            raise ValueError("delete_prefix needs a non-empty prefix (refusing to empty the whole container)")
        client, names, deleted = self.get_conn(), [n for n, _ in self.list_names(prefix)], 0
        for start in range(0, len(names), BATCH_SIZE):
            chunk = names[start : start + BATCH_SIZE]

            def op(kw: dict[str, Any], chunk: list[str] = chunk) -> int:
                responses = client.delete_blobs(*chunk, raise_on_any_failure=False, **kw)
                return batch_deleted((r.status_code for r in responses), f"delete {prefix}")

            deleted += self._run(f"delete {prefix}", op)
        return deleted
