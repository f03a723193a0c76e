"""Small JSON documents in Azure Blob Storage, asynchronously: ``AsyncBlobStore`` (azure.storage.blob.aio),
what triggers and the UI use; the same calls, retries and errors as the sync ``blob_store.BlobStore``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError

from .blob_auth import BlobAuth, credential_for
from .blob_requests import JSON_CONTENT, dumps, loads, write_conditions
from .blob_retry import _Attempts
from .blob_store_base import BlobStoreBase

if TYPE_CHECKING:
    from types import TracebackType

    from azure.storage.blob.aio import ContainerClient as AsyncContainerClient

T = TypeVar("T")
A = TypeVar("A", bound="AsyncBlobStore")


class AsyncBlobStore(BlobStoreBase):
    """The async twin of :class:`~airflow_kueue_provider.storage.blob_store.BlobStore`; use ``async with``."""

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
        """See :meth:`~airflow_kueue_provider.storage.blob_store.BlobStore.check`."""
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
            raise self._missing_container()

    async def read_json(self, name: str) -> tuple[dict[str, Any] | None, str | None]:
        """See :meth:`~airflow_kueue_provider.storage.blob_store.BlobStore.read_json`."""
        blob = (await self.get_conn()).get_blob_client(name)

        async def op(kw: dict[str, Any]) -> tuple[bytes, str] | None:
            try:
                download = await blob.download_blob(**kw)
                return await download.readall(), download.properties.etag
            except ResourceNotFoundError:
                return None

        found = await self._run(f"read {name}", op)
        return (None, None) if found is None else (loads(found[0], name), found[1])

    async def write_json(
        self,
        name: str,
        data: Mapping[str, Any],
        *,
        if_match: str | None = None,
        if_none_match: bool = False,
        timeout: float | None = None,
    ) -> str:
        """See :meth:`~airflow_kueue_provider.storage.blob_store.BlobStore.write_json`."""
        body, conditions = dumps(data), write_conditions(if_match, if_none_match)
        client = await self.get_conn()
        blob = client.get_blob_client(name)

        async def op(kw: dict[str, Any]) -> str:
            try:
                return str(
                    (await blob.upload_blob(body, content_settings=JSON_CONTENT, **conditions, **kw))["etag"]
                )
            except ResourceNotFoundError as exc:
                if getattr(exc, "error_code", None) != "ContainerNotFound" or not self.create_container:
                    raise
            with contextlib.suppress(ResourceExistsError):
                await client.create_container(**kw)
            return str(
                (await blob.upload_blob(body, content_settings=JSON_CONTENT, **conditions, **kw))["etag"]
            )

        return await self._run(f"write {name}", op, timeout)
