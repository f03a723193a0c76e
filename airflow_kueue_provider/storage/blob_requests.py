"""What the Blob stores send and how they read the answers: JSON documents, write conditions, batch deletes.

Shared by the sync and the async store, so both encode a document, condition a write and judge a batch
delete the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import ContentSettings

from .blob_errors import BlobStoreError

JSON_CONTENT = ContentSettings(content_type="application/json")
BATCH_SIZE = 256  # the Blob Batch API limit per request


def dumps(data: Mapping[str, Any]) -> bytes:
    """One compact, key-sorted JSON body (the same document always uploads the same bytes)."""
    return json.dumps(data, separators=(",", ":"), sort_keys=True).encode()


def loads(raw: bytes, name: str) -> dict[str, Any]:
    """The JSON object of blob ``name``; :class:`BlobStoreError` naming the blob when it holds anything
    else."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise BlobStoreError(f"blob {name!r} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BlobStoreError(f"blob {name!r} holds JSON {type(data).__name__}, expected an object")
    return data


def write_conditions(if_match: str | None, if_none_match: bool) -> dict[str, Any]:
    """The ``upload_blob`` keywords of a conditional write: only over ``if_match``'s ETag, or only a new
    blob (``if_none_match``)."""
    if if_match is not None and if_none_match:
        raise ValueError("pass if_match or if_none_match, not both")
    if if_none_match:
        return {"overwrite": False}  # If-None-Match: * → 409 BlobAlreadyExists
    if if_match is not None:
        return {"overwrite": True, "etag": if_match, "match_condition": MatchConditions.IfNotModified}
    return {"overwrite": True}


def batch_deleted(statuses: Iterable[int], what: str) -> int:
    """How many of a batch's deletes went (202); a 404 is already gone, any other status fails the batch
    as an ``HttpResponseError`` with that status, so a 503 inside the batch is retried like any other."""
    statuses = list(statuses)
    bad = [s for s in statuses if s not in (202, 404)]
    if bad:
        error = HttpResponseError(message=f"{what}: {len(bad)} batch deletes failed (HTTP {bad[0]})")
        error.status_code = bad[0]
        raise error
    return statuses.count(202)
