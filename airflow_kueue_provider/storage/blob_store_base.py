"""What the sync and async Blob stores share: their container, retry policy and credentials.

No Airflow here: a store is given its credentials (``from_connection_string``, ``from_account_url``,
``from_sas``, ``from_sas_file``, or a ``BlobAuth``); the Airflow hooks (``hooks.blob_store``) add the lookup
of an Airflow connection.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from .blob_auth import BlobAuth, account_url_from_connection_string
from .blob_errors import BlobConfigError, redact
from .blob_retry import RetryPolicy
from .sas_file import FileSasCredential

H = TypeVar("H", bound="BlobStoreBase")

DEFAULT_CONN_ID = "kueue_blob_default"
DEFAULT_CONTAINER = "airflow-kueue"


class BlobStoreBase:
    """A store's settings and constructors; its client and calls are the sync or async subclass's."""

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
        """``<account URL>/<container>`` for messages, secrets redacted."""
        url = self._auth.account_url if self._auth else f"<connection {self.blob_conn_id}>"
        return redact(f"{url.rstrip('/')}/{self.container}")

    def _no_auth(self) -> BlobConfigError:
        return BlobConfigError(
            f"no credentials for {self.where}: build the store with from_connection_string(), "
            "from_account_url() or from_sas(), or use hooks.blob_store.BlobStoreHook to read an Airflow "
            f"connection ({self.blob_conn_id!r})"
        )

    def _missing_container(self) -> BlobConfigError:
        return BlobConfigError(
            f"container {self.container!r} does not exist in {self.where.rsplit('/', 1)[0]}: create it "
            "or pass create_container=True"
        )
