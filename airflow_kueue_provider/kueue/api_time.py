"""Timestamps as the Kubernetes API writes them (RFC 3339, ``2026-05-01T10:00:00Z``)."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_api_time(value: object) -> datetime | None:
    """An aware datetime (UTC when no offset is given); None when absent or malformed."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def last_written(obj: object) -> datetime | None:
    """When the object was last written, as far as its ``metadata.managedFields`` say (the newest entry's
    ``time``: to the second, by the apiserver's clock); None without any."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    fields = metadata.get("managedFields") if isinstance(metadata, dict) else None
    times = (parse_api_time(entry.get("time")) for entry in fields or () if isinstance(entry, dict))
    return max((t for t in times if t is not None), default=None)
