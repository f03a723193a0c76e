"""Small JSON documents in Azure Blob Storage: sync ``BlobStore`` and async ``AsyncBlobStore``.

No Airflow here: a store is given its credentials (``from_connection_string``, ``from_account_url``,
``from_sas``, or a ``BlobAuth``). The worker SDK uses it as it is in a shard's container; the Airflow hooks
(``hooks.blob_store``) add the lookup of an Airflow connection.

The Azure SDK's own retries are switched off (``retry_total=0``): this module retries transient faults itself
with capped exponential backoff, so a caller decides how long a call may block (``RetryPolicy.attempts``, or a
``timeout`` budget on writes) and gets :class:`BlobUnavailable` when the budget is spent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from azure.core import MatchConditions
from azure.core.exceptions import (
    HttpResponseError,
    ResourceExistsError,
    ResourceNotFoundError,
)
from azure.storage.blob import ContainerClient, ContentSettings

from ..kueue.checkpoint_retention import BlobInfo
from .blob_auth import (
    BlobAuth,
    account_name_from_url,
    account_url_from_connection_string,
    container_url_of,
    credential_for,
)
from .blob_errors import (
    BlobConfigError,
    BlobPreconditionFailed,
    BlobStoreError,
    BlobUnavailable,
    redact,
    register_secret,
)
from .blob_retry import RetryPolicy, _Attempts, is_transient
from .sas_file import FileSasCredential, new_sas_after

__all__ = [
    "AsyncBlobStore",
    "BlobAuth",
    "BlobConfigError",
    "BlobPreconditionFailed",
    "BlobStore",
    "BlobStoreError",
    "BlobUnavailable",
    "RetryPolicy",
    "account_name_from_url",
    "account_url_from_connection_string",
    "is_transient",
    "redact",
    "register_secret",
]

if TYPE_CHECKING:
    from types import TracebackType

    from azure.storage.blob.aio import ContainerClient as AsyncContainerClient

T = TypeVar("T")
H = TypeVar("H", bound="_BlobStoreBase")
S = TypeVar("S", bound="BlobStore")
A = TypeVar("A", bound="AsyncBlobStore")
log = logging.getLogger(__name__)

DEFAULT_CONN_ID = "kueue_blob_default"
DEFAULT_CONTAINER = "airflow-kueue"
_JSON = ContentSettings(content_type="application/json")
_BATCH = 256  # the Blob Batch API limit per request


def _dumps(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":"), sort_keys=True).encode()


def _loads(raw: bytes, name: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise BlobStoreError(f"blob {name!r} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BlobStoreError(f"blob {name!r} holds JSON {type(data).__name__}, expected an object")
    return data


def _write_kwargs(if_match: str | None, if_none_match: bool) -> dict[str, Any]:
    if if_match is not None and if_none_match:
        raise ValueError("pass if_match or if_none_match, not both")
    if if_none_match:
        return {"overwrite": False}  # If-None-Match: * → 409 BlobAlreadyExists
    if if_match is not None:
        return {"overwrite": True, "etag": if_match, "match_condition": MatchConditions.IfNotModified}
    return {"overwrite": True}


def _batch_deleted(statuses: Iterable[int], what: str) -> int:
    statuses = list(statuses)
    bad = [s for s in statuses if s not in (202, 404)]
    if bad:
        error = HttpResponseError(message=f"{what}: {len(bad)} batch deletes failed (HTTP {bad[0]})")
        error.status_code = bad[0]  # so a 503 inside the batch is retried like any other
        raise error
    return statuses.count(202)


# -- the hooks -----------------------------------------------------------------------------------------------


class _BlobStoreBase:
    def __init__(
        self,
        blob_conn_id: str = DEFAULT_CONN_ID,
        container: str = DEFAULT_CONTAINER,
        *,
        create_container: bool = True,
        retry: RetryPolicy | None = None,
        auth: BlobAuth | None = None,
    ) -> None:
        self.blob_conn_id = blob_conn_id
        self.container = container
        self.create_container = create_container
        self.retry = retry or RetryPolicy()
        self._auth = auth
        http_log = logging.getLogger("azure.core.pipeline.policies.http_logging_policy")
        if http_log.level == logging.NOTSET:  # like WasbHook: one INFO record per request is too chatty
            http_log.setLevel(logging.WARNING)

    @classmethod
    def from_connection_string(cls: type[H], connection_string: str, container: str, **kwargs: Any) -> H:
        """A hook that needs no Airflow connection (worker side, tests)."""
        auth = BlobAuth(
            "connection_string", account_url_from_connection_string(connection_string), connection_string
        )
        return cls("", container, auth=auth, **kwargs)

    @classmethod
    def from_account_url(
        cls: type[H], account_url: str, container: str, *, credential: Any = None, **kwargs: Any
    ) -> H:
        """A hook on an account URL with ``credential`` (None → DefaultAzureCredential); no Airflow needed."""
        kind = "default_credential" if credential is None else "credential"
        return cls("", container, auth=BlobAuth(kind, account_url, credential=credential), **kwargs)

    @classmethod
    def from_sas(cls: type[H], account_url: str, container: str, sas_token: str, **kwargs: Any) -> H:
        """A hook on one container with a SAS token (what a shard pod gets); no Airflow needed."""
        return cls("", container, auth=BlobAuth("sas", account_url, secret=sas_token.lstrip("?")), **kwargs)

    @classmethod
    def from_sas_file(
        cls: type[H], account_url: str, container: str, credential: FileSasCredential, **kwargs: Any
    ) -> H:
        """A hook on one container with the SAS of a file the kubelet refreshes (a pod's mounted Secret):
        a re-signed SAS is used as soon as it is there, and a refused request waits for one."""
        return cls("", container, auth=BlobAuth("credential", account_url, credential=credential), **kwargs)

    @property
    def where(self) -> str:
        url = self._auth.account_url if self._auth else f"<connection {self.blob_conn_id}>"
        return redact(f"{url.rstrip('/')}/{self.container}")

    def _no_auth(self) -> BlobConfigError:
        return BlobConfigError(
            f"no credentials for {self.where}: build the store with from_connection_string(), "
            "from_account_url() or from_sas(), or use hooks.blob_store.BlobStoreHook to read an Airflow "
            f"connection ({self.blob_conn_id!r})"
        )


class BlobStore(_BlobStoreBase):
    """Synchronous JSON documents in one container; see the module docstring for connections and retries."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client: ContainerClient | None = None

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
        """The container client (built once; building does no I/O)."""
        if self._client is None:
            auth = self.get_auth()
            if auth.kind == "connection_string":
                assert auth.connection_string is not None
                self._client = ContainerClient.from_connection_string(
                    auth.connection_string, self.container, retry_total=0
                )
            else:
                credential = credential_for(auth, aio=False)
                self._client = ContainerClient(auth.account_url, self.container, credential, retry_total=0)
        return self._client

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
            raise BlobConfigError(
                f"container {self.container!r} does not exist in {self.where.rsplit('/', 1)[0]}: create it "
                "or pass create_container=True"
            )

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
        return (None, None) if found is None else (_loads(found[0], name), found[1])

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
        body, conditions = _dumps(data), _write_kwargs(if_match, if_none_match)
        blob = self.get_conn().get_blob_client(name)

        def op(kw: dict[str, Any]) -> str:
            try:
                return str(blob.upload_blob(body, content_settings=_JSON, **conditions, **kw)["etag"])
            except ResourceNotFoundError as exc:
                if getattr(exc, "error_code", None) != "ContainerNotFound" or not self.create_container:
                    raise
            with contextlib.suppress(ResourceExistsError):
                self.get_conn().create_container(**kw)
            return str(blob.upload_blob(body, content_settings=_JSON, **conditions, **kw)["etag"])

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
        for start in range(0, len(blobs), _BATCH):
            chunk = blobs[start : start + _BATCH]
            conditioned = [
                {"name": b.name, "etag": b.etag, "match_condition": MatchConditions.IfNotModified}
                for b in chunk
            ]

            def op(kw: dict[str, Any], conditioned: list[dict[str, Any]] = conditioned) -> list[int]:
                responses = client.delete_blobs(*conditioned, raise_on_any_failure=False, **kw)
                statuses = [r.status_code for r in responses]
                _batch_deleted([s for s in statuses if s != 412], "delete unchanged blobs")
                return statuses

            for blob, status in zip(chunk, self._run("delete unchanged blobs", op), strict=True):
                (deleted if status == 202 else kept if status == 412 else []).append(blob.name)
        return deleted, kept

    def delete_prefix(self, prefix: str) -> int:
        """Delete every blob under a non-empty ``prefix`` (256 per batch request); returns how many went."""
        if not prefix:
            raise ValueError("delete_prefix needs a non-empty prefix (refusing to empty the whole container)")
        client, names, deleted = self.get_conn(), [n for n, _ in self.list_names(prefix)], 0
        for start in range(0, len(names), _BATCH):
            chunk = names[start : start + _BATCH]

            def op(kw: dict[str, Any], chunk: list[str] = chunk) -> int:
                responses = client.delete_blobs(*chunk, raise_on_any_failure=False, **kw)
                return _batch_deleted((r.status_code for r in responses), f"delete {prefix}")

            deleted += self._run(f"delete {prefix}", op)
        return deleted


class AsyncBlobStore(_BlobStoreBase):
    """The async twin of :class:`BlobStore` (azure.storage.blob.aio); use ``async with``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client: AsyncContainerClient | None = None
        self._credential: Any = None

    async def __aenter__(self: A) -> A:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._credential is not None and hasattr(self._credential, "close"):
            await self._credential.close()
        self._credential = None

    async def get_auth(self) -> BlobAuth:
        if self._auth is None:
            raise self._no_auth()
        return self._auth

    async def get_conn(self) -> AsyncContainerClient:
        if self._client is None:
            from azure.storage.blob.aio import ContainerClient as AioContainerClient

            auth = await self.get_auth()
            if auth.kind == "connection_string":
                assert auth.connection_string is not None
                self._client = AioContainerClient.from_connection_string(
                    auth.connection_string, self.container, retry_total=0
                )
            else:
                credential = credential_for(auth, aio=True)
                if auth.kind == "default_credential":
                    self._credential = credential  # ours to close
                self._client = AioContainerClient(auth.account_url, self.container, credential, retry_total=0)
        return self._client

    async def _run(
        self, what: str, op: Callable[[dict[str, Any]], Awaitable[T]], budget: float | None = None
    ) -> T:
        attempts = _Attempts(self.retry, what, self.where, budget)
        while True:
            try:
                return await op(attempts.request_kwargs())
            except Exception as exc:
                await asyncio.sleep(attempts.failed(exc))

    async def check(self) -> None:
        """See :meth:`BlobStore.check`."""
        client = await self.get_conn()

        async def op(kw: dict[str, Any]) -> bool:
            try:
                await client.get_container_properties(**kw)
                return True
            except ResourceNotFoundError:
                if not self.create_container:
                    return False
            with contextlib.suppress(ResourceExistsError):
                await client.create_container(**kw)
            return True

        if not await self._run("check", op):
            raise BlobConfigError(
                f"container {self.container!r} does not exist in {self.where.rsplit('/', 1)[0]}: create it "
                "or pass create_container=True"
            )

    async def read_json(self, name: str) -> tuple[dict[str, Any] | None, str | None]:
        """See :meth:`BlobStore.read_json`."""
        blob = (await self.get_conn()).get_blob_client(name)

        async def op(kw: dict[str, Any]) -> tuple[bytes, str] | None:
            try:
                download = await blob.download_blob(**kw)
                return await download.readall(), download.properties.etag
            except ResourceNotFoundError:
                return None

        found = await self._run(f"read {name}", op)
        return (None, None) if found is None else (_loads(found[0], name), found[1])

    async def write_json(
        self,
        name: str,
        data: Mapping[str, Any],
        *,
        if_match: str | None = None,
        if_none_match: bool = False,
        timeout: float | None = None,
    ) -> str:
        """See :meth:`BlobStore.write_json`."""
        body, conditions = _dumps(data), _write_kwargs(if_match, if_none_match)
        client = await self.get_conn()
        blob = client.get_blob_client(name)

        async def op(kw: dict[str, Any]) -> str:
            try:
                return str((await blob.upload_blob(body, content_settings=_JSON, **conditions, **kw))["etag"])
            except ResourceNotFoundError as exc:
                if getattr(exc, "error_code", None) != "ContainerNotFound" or not self.create_container:
                    raise
            with contextlib.suppress(ResourceExistsError):
                await client.create_container(**kw)
            return str((await blob.upload_blob(body, content_settings=_JSON, **conditions, **kw))["etag"])

        return await self._run(f"write {name}", op, timeout)
