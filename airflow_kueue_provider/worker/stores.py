"""The Blob clients a shard program uses: one for its checkpoints, one of its own for the SIGTERM flush."""

from __future__ import annotations

import logging

from ..kueue.names import CHECKPOINT_URL_ENV
from ..storage.blob_auth import account_url_from_connection_string
from ..storage.blob_errors import redact
from ..storage.blob_retry import RetryPolicy
from .checkpoint_store import JsonStore, store_for
from .env import CONNECTION_STRING, ShardEnv

log = logging.getLogger("airflow_kueue_provider.worker")


def stores_for(env: ShardEnv) -> tuple[JsonStore, JsonStore]:
    """The shard's store and the SIGTERM flush's own (never waiting on the interrupted main thread's)."""
    if env.connection_string:
        endpoint = account_url_from_connection_string(env.connection_string)
        if endpoint.rstrip("/") != env.account_url.rstrip("/"):
            log.warning(
                "%s points at %s, %s at %s: using the connection string's endpoint",
                CONNECTION_STRING,
                redact(endpoint),
                CHECKPOINT_URL_ENV,
                env.account_url,
            )
    store = store_for(env, RetryPolicy())
    flush_store = store_for(
        env, RetryPolicy(attempts=20, base_delay=0.2, max_delay=2.0, request_timeout=10.0)
    )
    return store, flush_store


def close_stores(*stores: JsonStore) -> None:
    for store in {id(s): s for s in stores}.values():
        close = getattr(store, "close", None)
        if callable(close):
            close()
