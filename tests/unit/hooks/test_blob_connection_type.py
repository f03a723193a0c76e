"""The kueue_blob connection type: its form declared once (provider info for Airflow 3.2+, hook methods for
3.1), a fresh Airflow listing it with its fields, the hook a BaseHook with test_connection."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from airflow_kueue_provider.airflow_compat import BaseHook
from airflow_kueue_provider.get_provider_info import get_provider_info
from airflow_kueue_provider.hooks.blob_connection_form import EXTRA_FIELDS, HOOK_CLASS
from airflow_kueue_provider.hooks.blob_store import BlobStoreHook
from airflow_kueue_provider.storage.blob_auth import auth_from_connection

FRESH_AIRFLOW = """
import importlib.util, json
from airflow import __version__
from airflow.providers_manager import ProvidersManager
from packaging.version import Version
pm = ProvidersManager()
hook = pm.hooks["kueue_blob"]
print(json.dumps({
    "class": hook.hook_class_name, "name": hook.hook_name, "attr": hook.connection_id_attribute_name,
    "testable": hook.connection_testable,
    "widgets": {k: v.is_sensitive for k, v in pm.connection_form_widgets.items() if "__kueue_blob__" in k},
    "behaviour": pm.field_behaviours.get("kueue_blob"),
    "form_from_hook_class_without_fab": Version(__version__) < Version("3.2")
        and importlib.util.find_spec("flask_appbuilder") is None,
}))
"""


def test_the_provider_info_declares_the_type_with_its_fields() -> None:
    (entry,) = get_provider_info()["connection-types"]
    assert (entry["connection-type"], entry["hook-class-name"]) == ("kueue_blob", HOOK_CLASS)
    assert set(entry["conn-fields"]) == set(EXTRA_FIELDS)
    secret = {k for k, v in entry["conn-fields"].items() if v["schema"].get("format") == "password"}
    assert secret == {"connection_string", "sas_token"}
    assert entry["ui-field-behaviour"]["relabeling"]["host"] == "Account URL"


def test_a_fresh_airflow_lists_the_type_with_its_fields() -> None:
    out = subprocess.run([sys.executable, "-c", FRESH_AIRFLOW], capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["class"] == HOOK_CLASS and seen["name"] == "Kueue Blob checkpoints"
    assert seen["attr"] == "blob_conn_id" and seen["testable"] is True
    if seen["behaviour"] is None and seen["form_from_hook_class_without_fab"]:
        # Airflow 3.1 builds every connection form from the hook class's FAB widgets; with no FAB installed
        # (the lowest-Airflow lane) it registers the type without a form, as it does the cncf provider's.
        return
    assert seen["widgets"] == {f"extra__kueue_blob__{k}": f.secret for k, f in EXTRA_FIELDS.items()}
    assert "schema" in seen["behaviour"]["hidden_fields"]
    assert seen["behaviour"]["relabeling"]["password"].startswith("Account key")


def test_airflow_3_1_asks_the_hook_class_for_the_same_form() -> None:
    wtforms = pytest.importorskip("wtforms", reason="the form's widgets exist where the FAB UI runs")
    PasswordField, StringField = wtforms.PasswordField, wtforms.StringField
    widgets = BlobStoreHook.get_connection_form_widgets()
    assert set(widgets) == set(EXTRA_FIELDS)
    for name, field in EXTRA_FIELDS.items():
        assert widgets[name].field_class is (PasswordField if field.secret else StringField), name
    behaviour = BlobStoreHook.get_ui_field_behaviour()
    assert behaviour["hidden_fields"] == ["schema", "port"] and "host" in behaviour["relabeling"]


def test_the_hook_is_an_airflow_hook_made_as_airflow_makes_it() -> None:
    hook = BlobStoreHook(blob_conn_id="some_blob")  # Connection.get_hook passes conn_name_attr by name
    assert isinstance(hook, BaseHook) and hook.conn_type == "kueue_blob"
    assert hook.blob_conn_id == "some_blob" and hook.log is not None


@pytest.mark.parametrize("prefix", ["", "extra__wasb__", "extra__kueue_blob__"])
def test_old_and_new_field_names_mean_the_same(prefix: str) -> None:
    auth = auth_from_connection(
        "c", "https://acct.blob.core.windows.net/", None, None, {prefix + "sas_token": "sv=1"}
    )
    assert (auth.kind, auth.secret, auth.account_url) == (
        "sas",
        "sv=1",
        "https://acct.blob.core.windows.net/",
    )


def test_test_connection_names_missing_fields_without_a_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_EMPTY_BLOB", json.dumps({"conn_type": "kueue_blob"}))
    ok, message = BlobStoreHook("empty_blob").test_connection()
    assert not ok and "has no usable fields" in message and "connection_string" in message
