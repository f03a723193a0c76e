"""The Blob stores as Airflow hooks: credentials from an Airflow connection of type ``kueue_blob`` (its form:
``blob_connection_form``) or ``wasb`` (the same fields, see ``storage.blob_auth.auth_from_connection``);
everything else is ``storage.blob_store``. ``BlobStoreHook`` is an Airflow ``BaseHook`` with
``test_connection``, so the connection form's Test button checks a connection without writing anything."""

from __future__ import annotations

import asyncio
from typing import Any

from azure.core.exceptions import ResourceNotFoundError

from ..airflow_compat import BaseHook
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
from . import blob_connection_form as form

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


TEST_BUDGET_SECONDS = 15.0
"""How long the connection form's Test may retry an unreachable account before saying so (the UI waits)."""


def _unknown_conn(conn_id: str, exc: Exception) -> BlobConfigError:
    if not any(c.__name__ == "AirflowNotFoundException" for c in type(exc).__mro__):
        raise exc
    env = "AIRFLOW_CONN_" + conn_id.upper()
    return BlobConfigError(
        f"Airflow connection {conn_id!r} is not defined: create it (UI, `airflow connections add`) "
        f'or set {env}, e.g. to \'{{"conn_type": "{form.CONN_TYPE}", '
        '"extra": {"connection_string": "..."}}\''
    )


class BlobStoreHook(BlobStore, BaseHook):
    """A :class:`~airflow_kueue_provider.storage.blob_store.BlobStore` whose credentials come from the
    Airflow connection ``blob_conn_id`` (read once, when first needed)."""

    conn_name_attr = "blob_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = form.CONN_TYPE
    hook_name = form.HOOK_NAME

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        BlobStore.__init__(self, *args, **kwargs)  # the store's chain ends before BaseHook's
        BaseHook.__init__(self)

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """The form's extra fields for Airflow 3.1 (3.2+ reads them from the provider info)."""
        return form.form_widgets()

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return form.ui_field_behaviour()

    def get_auth(self) -> BlobAuth:
        if self._auth is None:
            try:
                conn = self.get_connection(self.blob_conn_id)
            except Exception as exc:
                raise _unknown_conn(self.blob_conn_id, exc) from None
            self._auth = _auth(self.blob_conn_id, conn, conn.extra_dejson)
        return self._auth

    def test_connection(self) -> tuple[bool, str]:
        """``(ok, message)`` for Airflow's Test button: reads the container's properties (a SAS that may not:
        lists one blob), creates and writes nothing. The message names the cause (fields, credentials,
        missing container, unreachable account), never a secret."""
        try:
            client = self.get_conn()

            def read(kw: dict[str, Any]) -> bool:
                try:
                    if self.get_auth().kind == "sas":
                        next(iter(client.list_blobs(results_per_page=1, **kw).by_page()), None)
                    else:
                        client.get_container_properties(**kw)
                except ResourceNotFoundError:
                    return False
                return True

            found = self._run("test connection", read, budget=TEST_BUDGET_SECONDS)
        except BlobUnavailable as exc:
            return False, f"unreachable: {exc}"
        except BlobStoreError as exc:  # BlobConfigError: no usable fields, or credentials refused
            return False, str(exc)
        except Exception as exc:  # the SDK refusing a malformed field, say
            return False, f"{type(exc).__name__}: {redact(exc)}"
        if not found:
            return False, (
                f"credentials accepted, but container {self.container!r} does not exist in "
                f"{self.where.rsplit('/', 1)[0]}: create it, or let the first checkpointing task create it "
                "(Checkpointing(create_container=True), the default, needs the right to create containers)"
            )
        return True, f"connected: {self.where} is readable with these credentials"


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
