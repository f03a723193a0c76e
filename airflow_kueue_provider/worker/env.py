"""The environment the operator injects into every shard container, parsed and validated."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..kueue.index_set import IndexSet
from ..kueue.names import (
    CHECKPOINT_PREFIX_ENV,
    CHECKPOINT_SAS_ENV,
    CHECKPOINT_SAS_FILE_ENV,
    CHECKPOINT_URL_ENV,
    GRACE_ENV,
    INDEX_ENV,
    SHARD_ITEMS_BLOB_ENV,
    SHARD_ITEMS_ENV,
    SHARDS_ENV,
    SHARDS_PER_POD_ENV,
)
from .mapping import pack_shape, shard_ids_for_index

CONNECTION_STRING = "AZURE_STORAGE_CONNECTION_STRING"  # local runs only: the operator never sends one
DEFAULT_GRACE_SECONDS = 25.0


def split_checkpoint_url(url: str) -> tuple[str, str]:
    """``(account_url, container)`` from ``<account URL>/<container>``.

    ``https://acct.blob.core.windows.net/ckpt`` → (``https://acct.blob.core.windows.net/``, ``ckpt``);
    Azurite's path-style ``http://127.0.0.1:10000/devstoreaccount1/ckpt`` keeps the account in the URL.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{CHECKPOINT_URL_ENV}={url!r} is not an http(s) URL of <account URL>/<container>")
    account_path, _, container = parts.path.strip("/").rpartition("/")
    if not container:
        raise ValueError(
            f"{CHECKPOINT_URL_ENV}={url!r} names no container (expected <account URL>/<container>)"
        )
    account_url = f"{parts.scheme}://{parts.netloc}/{account_path}".rstrip("/") + "/"
    return account_url, container


@dataclass(frozen=True)
class ShardEnv:
    index: int
    shard_id: int
    account_url: str
    container: str
    prefix: str
    grace_seconds: float
    connection_string: str | None = field(default=None, repr=False)
    sas_token: str | None = field(default=None, repr=False)
    sas_file: str | None = None
    """The same SAS as a file of the mounted Secret (kept current by the kubelet): read first when it
    exists; ``sas_token`` (the env var) serves pods of an earlier version and local runs."""
    shard_ids: tuple[int, ...] = ()
    """Every shard this pod runs, in order (``shard_id`` is the first); more than one in a packed Job."""
    per_pod: int = 1
    """The Job's largest pack (``AIRFLOW_KUEUE_SHARDS_PER_POD``): above 1, the Job packs shards (the last
    packs may hold fewer)."""
    items: str | None = field(default=None, repr=False)
    """``shard_items=`` inline: the list's JSON (``SHARD_ITEMS_ENV``)."""
    items_blob: str | None = None
    """``shard_items=`` from a blob: its reference (``SHARD_ITEMS_BLOB_ENV``); the items are staged."""
    job_shards: IndexSet | None = None
    """The Job's shard ids (``AIRFLOW_KUEUE_SHARDS``; None: shard id = index): the only shards a pod
    takes over from a release record."""
    layout: str = "single"
    """A key of the Job's shard list and packing (every pod of the Job has the same): release records
    (``pack_handoff``) are kept per layout, so a later try that packs other shards never reads them."""

    @property
    def packed(self) -> bool:
        return self.per_pod > 1

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> ShardEnv:
        """Parse and check every variable; errors name the variable and what it should hold."""
        raw_index = environ.get(INDEX_ENV)
        if raw_index is None or not raw_index.strip().isdigit():
            raise ValueError(
                f"{INDEX_ENV}={raw_index!r}: run this as a pod of an Indexed Job (completionMode: Indexed)"
            )
        index = int(raw_index)
        url = environ.get(CHECKPOINT_URL_ENV)
        if not url:
            raise ValueError(f"{CHECKPOINT_URL_ENV} is not set (expected <account URL>/<container>)")
        account_url, container = split_checkpoint_url(url)
        prefix = environ.get(CHECKPOINT_PREFIX_ENV, "").strip("/")
        if not prefix:
            raise ValueError(f"{CHECKPOINT_PREFIX_ENV} is not set (e.g. 'dag/run/task')")
        raw_grace = environ.get(GRACE_ENV, str(DEFAULT_GRACE_SECONDS))
        try:
            grace = float(raw_grace)
        except ValueError:
            raise ValueError(f"{GRACE_ENV}={raw_grace!r} is not a number of seconds") from None
        if grace <= 0:
            raise ValueError(f"{GRACE_ENV}={raw_grace!r} must be > 0")
        shards, packing = environ.get(SHARDS_ENV), environ.get(SHARDS_PER_POD_ENV)
        shard_ids = shard_ids_for_index(index, shards, packing)
        job_shards = IndexSet.parse(shards) if shards else None
        per_pod = pack_shape(job_shards, packing).per_pod if job_shards is not None else 1
        return cls(
            index=index,
            shard_id=shard_ids[0],
            shard_ids=shard_ids,
            per_pod=per_pod,
            account_url=account_url,
            container=container,
            prefix=prefix,
            grace_seconds=grace,
            connection_string=environ.get(CONNECTION_STRING) or None,
            sas_token=(environ.get(CHECKPOINT_SAS_ENV) or "").lstrip("?") or None,
            sas_file=environ.get(CHECKPOINT_SAS_FILE_ENV) or None,
            items=environ.get(SHARD_ITEMS_ENV) or None,
            items_blob=environ.get(SHARD_ITEMS_BLOB_ENV) or None,
            job_shards=job_shards,
            layout=layout_key(shards, packing),
        )


def layout_key(shards: str | None, packing: str | None) -> str:
    """16 hex digits naming ``(AIRFLOW_KUEUE_SHARDS, AIRFLOW_KUEUE_SHARDS_PER_POD)``."""
    raw = f"{(shards or '').strip()}|{(packing or '1').strip() or '1'}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]
