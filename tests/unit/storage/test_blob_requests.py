"""What both Blob stores send: one JSON encoding, write conditions, and how a batch delete's answers count."""

from __future__ import annotations

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError

from airflow_kueue_provider.storage.blob_errors import BlobStoreError
from airflow_kueue_provider.storage.blob_requests import batch_deleted, dumps, loads, write_conditions


def test_a_document_always_uploads_the_same_compact_bytes() -> None:
    assert dumps({"b": 1, "a": [1, 2]}) == b'{"a":[1,2],"b":1}'
    assert loads(dumps({"b": 1, "a": [1, 2]}), "x") == {"a": [1, 2], "b": 1}


@pytest.mark.parametrize(("raw", "says"), [(b"{not json", "is not valid JSON"), (b"[1]", "holds JSON list")])
def test_a_blob_that_is_no_json_object_is_named(raw: bytes, says: str) -> None:
    with pytest.raises(BlobStoreError, match=f"blob 'ckpt/3.json' {says}"):
        loads(raw, "ckpt/3.json")


def test_write_conditions_are_an_etag_match_or_a_new_blob_never_both() -> None:
    assert write_conditions(None, False) == {"overwrite": True}
    assert write_conditions(None, True) == {"overwrite": False}
    assert write_conditions('"0x1"', False) == {
        "overwrite": True,
        "etag": '"0x1"',
        "match_condition": MatchConditions.IfNotModified,
    }
    with pytest.raises(ValueError, match="not both"):
        write_conditions('"0x1"', True)


def test_a_batch_counts_its_deletes_and_fails_on_any_other_answer_with_its_status() -> None:
    assert batch_deleted([202, 404, 202], "delete p/") == 2
    with pytest.raises(HttpResponseError, match="delete p/: 1 batch deletes failed") as raised:
        batch_deleted([202, 503], "delete p/")
    assert raised.value.status_code == 503  # so the store retries it like any other 503
