"""The Blob stores as Airflow hooks: credentials from an Airflow connection (``wasb`` fields, see
``storage.blob_auth.auth_from_connection``); everything else is ``storage.blob_store``."""

from __future__ import annotations

import asyncio
from typing import Any

from ..storage.async_blob_store import AsyncBlobStore
from ..storage.blob_auth import BlobAuth, auth_from_connection
from ..storage.blob_errors import (
    BlobConfigError,
    BlobPreconditionFailed,
    BlobStoreError,
    BlobUnavailable,
    redact,
    register_secret,
)
from ..storage.blob_retry import RetryPolicy, is_transient
from ..storage.blob_store import BlobStore
from ..storage.blob_store_base import DEFAULT_CONN_ID

__all__ = [
    "AsyncBlobStoreHook",
    "BlobConfigError",
    "BlobPreconditionFailed",
    "BlobStoreError",
    "BlobStoreHook",
    "BlobUnavailable",
    "RetryPolicy",
    "is_transient",
    "redact",
    "register_secret",
]


def _auth(conn_id: str, conn: Any, extra: Any) -> BlobAuth:
    return auth_from_connection(conn_id, conn.host, conn.login, conn.password, extra)


def _unknown_conn(conn_id: str, exc: Exception) -> BlobConfigError:
    if not any(c.__name__ == "AirflowNotFoundException" for c in type(exc).__mro__):
        raise exc
    env = "AIRFLOW_CONN_" + conn_id.upper()
    return BlobConfigError(
        f"Airflow connection {conn_id!r} is not defined: create it (UI, `airflow connections add`) "
        f'or set {env}, e.g. to \'{{"conn_type": "wasb", "extra": {{"connection_string": "..."}}}}\''
    )


class BlobStoreHook(BlobStore):
    """A :class:`~airflow_kueue_provider.storage.blob_store.BlobStore` whose credentials come from the
    Airflow connection ``blob_conn_id`` (read once, when first needed)."""

    conn_name_attr = "blob_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    hook_name = "Kueue Blob checkpoints"

    def get_auth(self) -> BlobAuth:
        if self._auth is None:
            from airflow.sdk.bases.hook import BaseHook

            try:
                conn = BaseHook.get_connection(self.blob_conn_id)
            except Exception as exc:
                raise _unknown_conn(self.blob_conn_id, exc) from None
            self._auth = _auth(self.blob_conn_id, conn, conn.extra_dejson)
        return self._auth


class AsyncBlobStoreHook(AsyncBlobStore):
    """The async twin of :class:`BlobStoreHook` (the connection read off the event loop)."""

    conn_name_attr = "blob_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    hook_name = "Kueue Blob checkpoints"

    async def get_auth(self) -> BlobAuth:
        if self._auth is None:
            try:
                from airflow.providers.common.compat.connection import (
                    get_async_connection,
                    get_async_extra_dejson,
                )
            except ImportError:  # an older common-compat: the sync lookup, off the event loop
                sync = BlobStoreHook(self.blob_conn_id, self.container)
                self._auth = await asyncio.to_thread(sync.get_auth)
                return self._auth
            try:
                conn = await get_async_connection(self.blob_conn_id)
            except Exception as exc:
                raise _unknown_conn(self.blob_conn_id, exc) from None
            self._auth = _auth(self.blob_conn_id, conn, await get_async_extra_dejson(conn))
        return self._auth
