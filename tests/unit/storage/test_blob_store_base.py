"""What the sync and async Blob stores share: constructors without Airflow, messages without secrets."""

from __future__ import annotations

import pytest

from airflow_kueue_provider.storage.async_blob_store import AsyncBlobStore
from airflow_kueue_provider.storage.blob_errors import BlobConfigError
from airflow_kueue_provider.storage.blob_store import BlobStore
from airflow_kueue_provider.storage.blob_store_base import DEFAULT_CONN_ID, DEFAULT_CONTAINER

URL = "https://acct.blob.core.windows.net"


@pytest.mark.parametrize("store_class", [BlobStore, AsyncBlobStore])
def test_each_constructor_gives_the_store_its_credentials(store_class: type[BlobStore]) -> None:
    sas = store_class.from_sas(URL, "ckpt", "?sv=1&sig=secret-sig")
    assert type(sas) is store_class and sas.container == "ckpt"
    assert sas._auth is not None and sas._auth.kind == "sas" and sas._auth.secret == "sv=1&sig=secret-sig"
    default = store_class.from_account_url(URL, "ckpt")
    assert default._auth is not None and default._auth.kind == "default_credential"
    given = store_class.from_account_url(URL, "ckpt", credential=object())
    assert given._auth is not None and given._auth.kind == "credential"
    key = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.windows.net"
    assert store_class.from_connection_string(key, "ckpt").where == f"{URL}/ckpt"


def test_a_store_without_credentials_says_how_to_give_it_some() -> None:
    store = BlobStore()
    assert (store.blob_conn_id, store.container) == (DEFAULT_CONN_ID, DEFAULT_CONTAINER)
    with pytest.raises(BlobConfigError, match=r"from_connection_string.*BlobStoreHook") as raised:
        store.get_auth()
    assert f"<connection {DEFAULT_CONN_ID}>/{DEFAULT_CONTAINER}" in str(raised.value)


def test_a_missing_container_names_it_and_the_account() -> None:
    error = BlobStore.from_sas(URL, "ckpt", "sv=1&sig=x")._missing_container()
    assert f"container 'ckpt' does not exist in {URL}" in str(error)
    assert "create_container=True" in str(error)
