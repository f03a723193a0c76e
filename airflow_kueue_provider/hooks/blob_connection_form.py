"""The ``kueue_blob`` connection type's form: its fields, labels and placeholders, declared once.

Airflow 3.2+ reads them from the provider info (``conn-fields``, ``ui-field-behaviour``: no hook import,
no wtforms); Airflow 3.1 asks the hook class (``BlobStoreHook.get_connection_form_widgets`` /
``get_ui_field_behaviour``, built from the same declarations). No Airflow import here:
``get_provider_info`` imports this module while Airflow loads its configuration.

The fields mean what ``storage.blob_auth.auth_from_connection`` reads (the microsoft-azure ``wasb``
meanings), so a ``wasb`` connection keeps working and a ``kueue_blob`` one is the same fields with a form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..storage.blob_auth import CONN_TYPE

__all__ = ["CONN_TYPE", "EXTRA_FIELDS", "form_widgets", "provider_connection_type", "ui_field_behaviour"]

HOOK_NAME = "Kueue Blob checkpoints"
HOOK_CLASS = "airflow_kueue_provider.hooks.blob_store.BlobStoreHook"


@dataclass(frozen=True)
class ExtraField:
    """A field kept in the connection's extra JSON under its own name."""

    label: str
    description: str
    secret: bool = False


EXTRA_FIELDS: dict[str, ExtraField] = {
    "connection_string": ExtraField(
        "Connection string",
        "The account's connection string (AccountName=...;AccountKey=... or a SAS); alone enough, wins "
        "over every other field.",
        secret=True,
    ),
    "sas_token": ExtraField(
        "SAS token", "A SAS token for the Account URL, or an https:// URL that carries one.", secret=True
    ),
    "tenant_id": ExtraField(
        "Tenant ID (service principal)",
        "With Login = client id and Password = client secret: a service principal (ClientSecretCredential).",
    ),
    "managed_identity_client_id": ExtraField(
        "Managed identity client ID", "No key, SAS or tenant: DefaultAzureCredential with this identity."
    ),
    "workload_identity_tenant_id": ExtraField(
        "Workload identity tenant ID", "No key, SAS or tenant: DefaultAzureCredential in this tenant."
    ),
}

HIDDEN_FIELDS = ["schema", "port"]
RELABELING = {
    "host": "Account URL",
    "login": "Account name (or client ID)",
    "password": "Account key (or client secret)",
}
PLACEHOLDERS = {
    "host": "https://<account>.blob.core.windows.net/",
    "login": "the storage account's name; with Tenant ID: the service principal's client id",
    "password": "the account key; with Tenant ID: the client secret",
    "connection_string": "DefaultEndpointsProtocol=https;AccountName=...;AccountKey=...",
    "sas_token": "sv=...&sig=... (or https://<account>.blob.core.windows.net/?sv=...)",
}


def provider_connection_type() -> dict[str, Any]:
    """The ``connection-types`` entry of ``get_provider_info`` (Airflow 3.2+ builds the form from it)."""
    return {
        "connection-type": CONN_TYPE,
        "hook-class-name": HOOK_CLASS,
        "hook-name": HOOK_NAME,
        "conn-fields": {
            name: {
                "label": field.label,
                "description": field.description,
                "schema": {"type": ["string", "null"], **({"format": "password"} if field.secret else {})},
            }
            for name, field in EXTRA_FIELDS.items()
        },
        "ui-field-behaviour": {
            "hidden-fields": HIDDEN_FIELDS,
            "relabeling": RELABELING,
            "placeholders": PLACEHOLDERS,
        },
    }


def ui_field_behaviour() -> dict[str, Any]:
    """The same behaviour as the hook method of Airflow 3.1 returns it."""
    return {"hidden_fields": HIDDEN_FIELDS, "relabeling": RELABELING, "placeholders": PLACEHOLDERS}


def form_widgets() -> dict[str, Any]:
    """The extra fields as wtforms fields, for Airflow 3.1 (which asks the hook class)."""
    from flask_appbuilder.fieldwidgets import BS3PasswordFieldWidget, BS3TextFieldWidget
    from wtforms import PasswordField, StringField

    return {
        name: (
            PasswordField(field.label, widget=BS3PasswordFieldWidget(), description=field.description)
            if field.secret
            else StringField(field.label, widget=BS3TextFieldWidget(), description=field.description)
        )
        for name, field in EXTRA_FIELDS.items()
    }
