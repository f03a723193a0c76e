"""API timestamps parse to aware datetimes, and anything else to None; an object's last write is its newest
managedFields time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from airflow_kueue_provider.kueue.api_time import last_written, parse_api_time


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2026-05-01T10:00:00Z", datetime(2026, 5, 1, 10, tzinfo=UTC)),
        ("2026-05-01T10:00:00.5z", datetime(2026, 5, 1, 10, 0, 0, 500000, tzinfo=UTC)),
        ("2026-05-01T12:00:00+02:00", datetime(2026, 5, 1, 12, tzinfo=timezone(timedelta(hours=2)))),
        ("2026-05-01T10:00:00", datetime(2026, 5, 1, 10, tzinfo=UTC)),
        (datetime(2026, 5, 1, 10), datetime(2026, 5, 1, 10, tzinfo=UTC)),
        ("", None),
        (None, None),
        ("soon", None),
        (1700000000, None),
    ],
)
def test_parse_api_time(raw: object, expected: datetime | None) -> None:
    assert parse_api_time(raw) == expected


def test_last_written_is_the_newest_managed_fields_time() -> None:
    obj = {
        "metadata": {
            "managedFields": [
                {"manager": "kueue", "time": "2026-05-01T10:00:05Z"},
                {"manager": "kube-controller-manager", "time": "2026-05-01T10:00:09Z"},
                {"manager": "someone", "time": "not a time"},
                "not an entry",
            ]
        }
    }
    assert last_written(obj) == datetime(2026, 5, 1, 10, 0, 9, tzinfo=UTC)


@pytest.mark.parametrize("obj", [{}, {"metadata": {}}, {"metadata": {"managedFields": []}}, None, "x"])
def test_last_written_of_an_object_without_managed_fields_is_none(obj: object) -> None:
    assert last_written(obj) is None
