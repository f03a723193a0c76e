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
