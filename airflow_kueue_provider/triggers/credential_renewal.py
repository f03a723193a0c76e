"""Keep a followed Job's pod SAS valid while the trigger follows it (``CredentialRenewal``).

A policy-bound SAS (account-key auth) expires with its stored access policy; a Job may wait in its queue, or
run, longer than ``Checkpointing(credential_ttl=...)``. So while the trigger follows the Job, a background
task moves the policy's window to now + TTL every quarter of the TTL. It never blocks or fails the trigger:
Blob trouble is logged and retried with backoff (the SAS stays valid for the rest of its window). A policy
that is gone (the attempt ended and revoked it, or the container was re-created) ends the renewal.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import random
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from datetime import datetime, timezone
from typing import Any

from ..kueue.checkpoint_access import CredentialRenewal

log = logging.getLogger(__name__)
MAX_BACKOFF = 300.0

Extend = Callable[[CredentialRenewal, datetime, datetime], int]
"""Moves the window of the renewal's policies; returns how many it moved (0: none left)."""


def extend_in_blob(renewal: CredentialRenewal, start: datetime, expiry: datetime) -> int:
    """The real ``Extend``: the shard container's stored access policies through the Blob connection (run in
    a worker thread; the azure libraries are imported there, never on the triggerer's event loop)."""
    blob_containers = importlib.import_module("airflow_kueue_provider.hooks.blob_containers")
    hook = blob_containers.BlobAccountHook(renewal.conn_id, renewal.container, create_container=False)
    moved: int = hook.extend_access(renewal.shard_container, renewal.policy_head, start, expiry)
    return moved


async def _renew(renewal: CredentialRenewal, where: str, extend: Extend) -> None:
    failures = 0
    delay = renewal.every_seconds
    while True:
        await asyncio.sleep(delay)
        start, expiry = renewal.window(datetime.now(timezone.utc))
        try:
            moved = await asyncio.to_thread(extend, renewal, start, expiry)
        except Exception as exc:
            failures += 1
            delay = min(renewal.every_seconds, random.uniform(1.0, min(MAX_BACKOFF, 2.0**failures)))
            log.warning("%s: renewing its pods' SAS failed (%s); retrying in %.0f s", where, exc, delay)
            continue
        if not moved:
            log.info(
                "%s: its pods' SAS has no stored access policy left (revoked or re-created): not renewed",
                where,
            )
            return
        failures, delay = 0, renewal.every_seconds
        log.info("%s: its pods' SAS is valid until %s", where, expiry.isoformat(timespec="seconds"))


@asynccontextmanager
async def renewing(
    config: Mapping[str, Any] | None, where: str, extend: Extend = extend_in_blob
) -> AsyncIterator[None]:
    """Renew while the ``async with`` body runs; nothing to do without a config (no checkpointing, workload
    identity, a user-delegation SAS, or a trigger serialized before renewals existed)."""
    if config is None:
        yield
        return
    task = asyncio.get_running_loop().create_task(
        _renew(CredentialRenewal.from_dict(config), where, extend), name=f"sas-renewal-{where}"
    )
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
