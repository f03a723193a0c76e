"""Errors of the Blob hooks, and the redaction that keeps secrets out of every message."""

from __future__ import annotations

import re
from urllib.parse import quote

from ..kueue.errors import KueueProviderError


class BlobStoreError(KueueProviderError):
    """A Blob Storage call failed (message already redacted)."""


class BlobConfigError(BlobStoreError, ValueError):
    """The connection, credentials or container are wrong; the message says what to fix."""


class BlobPreconditionFailed(BlobStoreError):
    """A conditional write lost: the ETag changed (412) or the blob already exists (409)."""


class BlobUnavailable(BlobStoreError):
    """Blob Storage did not answer within the retry budget; the caller may defer the write."""


# -- redaction -----------------------------------------------------------------------------------------------

_PATTERNS = (
    (re.compile(r"(?i)\b(AccountKey|SharedAccessSignature)=[^;\s'\"]+"), r"\1=***"),
    (re.compile(r"(?i)([?&]sig=)[^&\s'\"]+"), r"\1***"),
    (re.compile(r"(?i)(SharedKey(?:Lite)?\s+[^:\s]+:)[^\s'\"]+"), r"\1***"),
    (re.compile(r"(?i)(signature found in the HTTP request ')[^']*"), r"\1***"),
)
_secrets: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember a secret value (and its URL-encoded form) so :func:`redact` hides it anywhere in a text."""
    if value and len(value) >= 6:
        _secrets.update({value, quote(value, safe="")})


def redact(text: object) -> str:
    """``str(text)`` without account keys, SAS signatures, or any value passed to :func:`register_secret`."""
    result = str(text)
    for secret in sorted(_secrets, key=len, reverse=True):
        result = result.replace(secret, "***")
    for pattern, replacement in _PATTERNS:
        result = pattern.sub(replacement, result)
    return result
