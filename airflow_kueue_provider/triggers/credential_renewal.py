"""Keep a followed Job's pod SAS valid while the trigger follows it (``CredentialRenewal``).

A policy-bound SAS (account-key auth) expires with its stored access policy; a Job may wait in its queue, or
run, longer than ``Checkpointing(credential_ttl=...)``. So while the trigger follows the Job, a background
task moves the policy's window to now + TTL every quarter of the TTL. A user-delegation SAS (``resign``) has
no policy: the task signs a new one (at once, then every quarter of its short TTL) and writes it into the
Job's Secret, which its pods mount as a file the kubelet refreshes. It never blocks or fails the trigger:
trouble is logged and retried with backoff (the SAS stays valid for the rest of its window). A policy that
is gone (the attempt ended and revoked it, or the container was re-created), or a Secret that is gone or no
longer the Job's, ends the renewal.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from datetime import UTC, datetime
from typing import Any

from ..hooks.async_secrets import replace_sas
from ..hooks.cluster_target import ClusterTarget
from ..kueue.checkpoints.checkpoint_access import CredentialRenewal

log = logging.getLogger(__name__)
MAX_BACKOFF = 300.0

Extend = Callable[[CredentialRenewal, datetime, datetime], int]
"""Moves the window of the renewal's policies; returns how many it moved (0: none left)."""
Sign = Callable[[CredentialRenewal, datetime, datetime], str]
"""Signs a new SAS for the renewal's shard container, valid from start to expiry (in a worker thread)."""
Replace = Callable[[CredentialRenewal, str], Awaitable[bool]]
"""Writes a SAS into the renewal's Secret; False when it is gone or no longer the Job's."""


def extend_in_blob(renewal: CredentialRenewal, start: datetime, expiry: datetime) -> int:
    """The real ``Extend``: the shard container's stored access policies through the Blob connection (run in
    a worker thread; the azure libraries are imported there, never on the triggerer's event loop)."""
    blob_containers = importlib.import_module("airflow_kueue_provider.hooks.blob_containers")
    hook = blob_containers.BlobAccountHook(renewal.conn_id, renewal.container, create_container=False)
    moved: int = hook.extend_access(renewal.shard_container, renewal.policy_head, start, expiry)
    return moved


def sign_in_blob(renewal: CredentialRenewal, start: datetime, expiry: datetime) -> str:
    """The real ``Sign``: a user-delegation SAS through the Blob connection (in a worker thread, as above)."""
    blob_containers = importlib.import_module("airflow_kueue_provider.hooks.blob_containers")
    hook = blob_containers.BlobAccountHook(renewal.conn_id, renewal.container, create_container=False)
    token: str = hook.container_sas(renewal.shard_container, start, expiry)
    return token


def replace_in_cluster(target: ClusterTarget) -> Replace:
    """The real ``Replace``: a patch of the Secret on ``target``, conditioned on its owner's uid."""

    async def replace(renewal: CredentialRenewal, token: str) -> bool:
        return await replace_sas(target, renewal.namespace, renewal.secret_name, renewal.owner_uid, token)

    return replace


async def _resign(
    renewal: CredentialRenewal, start: datetime, expiry: datetime, sign: Sign, replace: Replace
) -> int:
    token = await asyncio.to_thread(sign, renewal, start, expiry)
    return int(await replace(renewal, token))


async def _renew(
    renewal: CredentialRenewal, where: str, extend: Extend, sign: Sign, replace: Replace | None
) -> None:
    failures = 0
    delay = 0.0 if renewal.resign else renewal.every_seconds  # a resumed trigger may find it near expiry
    while True:
        await asyncio.sleep(delay)
        start, expiry = renewal.window(datetime.now(UTC))
        try:
            if renewal.resign:
                if replace is None:
                    log.warning("%s: its pods' SAS cannot be re-signed here (no cluster to write to)", where)
                    return
                renewed = await _resign(renewal, start, expiry, sign, replace)
            else:
                renewed = await asyncio.to_thread(extend, renewal, start, expiry)
        except Exception as exc:
            failures += 1
            delay = min(renewal.every_seconds, random.uniform(1.0, min(MAX_BACKOFF, 2.0**failures)))
            log.warning("%s: renewing its pods' SAS failed (%s); retrying in %.0f s", where, exc, delay)
            continue
        if not renewed:
            log.info(
                "%s: its pods' SAS is not renewed: %s",
                where,
                f"its Secret {renewal.secret_name} is gone or not its own"
                if renewal.resign
                else "it has no stored access policy left (revoked or re-created)",
            )
            return
        failures, delay = 0, renewal.every_seconds
        log.info(
            "%s: its pods' SAS is valid until %s%s",
            where,
            expiry.isoformat(timespec="seconds"),
            " (re-signed into its Secret)" if renewal.resign else "",
        )


@asynccontextmanager
async def renewing(
    config: Mapping[str, Any] | None,
    where: str,
    extend: Extend = extend_in_blob,
    *,
    target: ClusterTarget | None = None,
    sign: Sign = sign_in_blob,
    replace: Replace | None = None,
) -> AsyncIterator[None]:
    """Renew while the ``async with`` body runs; nothing to do without a config (no checkpointing, workload
    identity, or a trigger serialized before renewals existed). A re-signed SAS is written on ``target``
    (or by ``replace``)."""
    if config is None:
        yield
        return
    if replace is None and target is not None:
        replace = replace_in_cluster(target)
    task = asyncio.get_running_loop().create_task(
        _renew(CredentialRenewal.from_dict(config), where, extend, sign, replace),
        name=f"sas-renewal-{where}",
    )
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
