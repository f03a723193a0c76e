"""Retries of Blob calls: which faults are transient, capped exponential backoff, and error mapping."""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import Any

from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
)

from .blob_errors import BlobConfigError, BlobPreconditionFailed, BlobStoreError, BlobUnavailable, redact

log = logging.getLogger("airflow_kueue_provider.storage.blob_store")
_TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` tries, capped exponential backoff; one request waits at most ``request_timeout`` s."""

    attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 8.0
    request_timeout: float = 20.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based): capped 2**n, jittered by half."""
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)


def is_transient(exc: BaseException) -> bool:
    """Connection refused/reset, timeouts, throttling (429) and 5xx are worth retrying."""
    if isinstance(exc, (ServiceRequestError, ServiceResponseError, ConnectionError, TimeoutError)):
        return True
    return isinstance(exc, HttpResponseError) and exc.status_code in _TRANSIENT_STATUSES


def _translate(exc: BaseException, what: str, where: str) -> BlobStoreError | None:
    status = getattr(exc, "status_code", None)
    code = getattr(exc, "error_code", None)
    code = getattr(code, "value", code) or type(exc).__name__  # StorageErrorCode is a str Enum
    if status == 412 or (status == 409 and code == "BlobAlreadyExists"):
        return BlobPreconditionFailed(f"{what}: write condition not met ({code})")
    if isinstance(exc, ClientAuthenticationError) or status in (401, 403):
        return BlobConfigError(
            f"{what}: authentication/authorization to {where} failed ({code}): check the account key, the "
            f"SAS token (expiry, permissions) or the identity's role (Storage Blob Data Contributor); a "
            f"pod's SAS lasts Checkpointing(credential_ttl=...) and is revoked when its attempt ends: "
            f"{redact(exc)}"
        )
    if status == 404 and code == "ContainerNotFound":
        return BlobConfigError(
            f"{what}: container {where} does not exist: create it or use create_container=True"
        )
    return None


class _Attempts:
    """Shared bookkeeping of one retried call: the request timeout to use and whether to try again."""

    def __init__(self, policy: RetryPolicy, what: str, where: str, budget: float | None) -> None:
        self.policy, self.what, self.where = policy, what, where
        self.start = time.monotonic()
        self.deadline = None if budget is None else self.start + budget
        self.attempt = 0

    def request_kwargs(self) -> dict[str, Any]:
        self.attempt += 1
        timeout = self.policy.request_timeout
        if self.deadline is not None:
            timeout = max(0.1, min(timeout, self.deadline - time.monotonic()))
        return {"connection_timeout": timeout, "read_timeout": timeout}

    def failed(self, exc: Exception) -> float:
        """Raise the right error for ``exc``, or return the delay before the next attempt."""
        mapped = _translate(exc, self.what, self.where)
        if mapped is not None:
            raise mapped from None
        if not is_transient(exc):
            if isinstance(exc, AzureError):
                raise BlobStoreError(f"{self.what} on {self.where} failed: {redact(exc)}") from None
            raise exc
        delay = self.policy.delay(self.attempt)
        out_of_time = self.deadline is not None and time.monotonic() + delay >= self.deadline
        if self.attempt >= self.policy.attempts or out_of_time:
            raise BlobUnavailable(
                f"{self.what}: {self.where} unavailable after {self.attempt} attempt(s) in "
                f"{time.monotonic() - self.start:.1f}s: {type(exc).__name__}: {redact(exc)}"
            ) from None
        log.warning("%s failed (%s); retry %d in %.1fs", self.what, redact(exc), self.attempt, delay)
        return delay
