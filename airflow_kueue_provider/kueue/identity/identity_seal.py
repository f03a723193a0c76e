"""The identity seal: HMACs, under a key only Airflow holds, that make a task's objects its own.

The identity labels and annotations are public (anyone who reads a DAG can compute them), so they only
pre-select. What a tenant cannot make is an HMAC under Airflow's key: over the object's kind, namespace, name
and full identity (the name seal, written at create) and, for the kinds the worker may patch, over the uid
the apiserver assigned (the uid seal, patched right after create: a copy re-created under the same name has
another uid). The hash part of the task's object names is keyed the same way, so no tenant can compute a
name ahead of the task and squat it. Pure: no I/O, no Airflow; the key comes from ``hooks.identity_key``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import kinds
from ..k8s_names import HASH_LENGTH
from ..names import SEAL_ANNOTATION, UID_SEAL_ANNOTATION
from .airflow_identity import AirflowIdentity, identity_of

_NAME_CONTEXT = "name/v1"
_SEAL_CONTEXT = "seal/v1"
_UID_CONTEXT = "uid/v1"
_FORECAST_CONTEXT = "forecast-run/v1"


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else {}


@dataclass(frozen=True)
class IdentitySeal:
    """The key and what it signs. ``repr`` and ``str`` never show the key (task logs print objects)."""

    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not self.key:
            raise ValueError("the identity seal needs a non-empty key")

    def _mac(self, *parts: str) -> str:
        message = json.dumps(parts).encode()  # JSON: part boundaries count
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    def name_hash(self, *parts: str) -> str:
        """``HASH_LENGTH`` hex digits of the keyed hash over ``parts``: a name's unguessable part."""
        return self._mac(_NAME_CONTEXT, *parts)[:HASH_LENGTH]

    def seal(self, kind: str, namespace: str, name: str, identity: AirflowIdentity) -> str:
        return self._mac(
            _SEAL_CONTEXT,
            kind,
            namespace,
            name,
            identity.dag_id,
            identity.task_id,
            identity.run_id,
            str(identity.map_index),
            str(identity.try_number),
        )

    def uid_seal(self, kind: str, namespace: str, name: str, uid: str) -> str:
        return self._mac(_UID_CONTEXT, kind, namespace, name, uid)

    def annotations(self, kind: str, namespace: str, name: str, identity: AirflowIdentity) -> dict[str, str]:
        """What the object carries from its create on."""
        return {SEAL_ANNOTATION: self.seal(kind, namespace, name, identity)}

    def uid_annotations(self, kind: str, obj: Mapping[str, Any]) -> dict[str, str]:
        """What is patched onto ``obj`` (as created: it has its uid) right after its create."""
        meta = obj["metadata"]
        return {UID_SEAL_ANNOTATION: self.uid_seal(kind, meta["namespace"], meta["name"], meta["uid"])}

    def forecast_run(self, namespace: str, name: str, seconds: int) -> str:
        """``FORECAST_RUN_ANNOTATION``'s value: the Job's forecast run, sealed over its namespace and name."""
        return f"{seconds}:{self._mac(_FORECAST_CONTEXT, namespace, name, str(seconds))}"

    def read_forecast_run(self, namespace: str, name: str, value: object) -> int | None:
        """The seconds a ``forecast_run`` value says, only if sealed for that Job; else None (a tenant can set
        any annotation on its own Jobs, not a seal)."""
        if not isinstance(value, str) or value.count(":") != 1:
            return None
        seconds, given = value.split(":")
        if not seconds.isdigit() or len(seconds) > 9:
            return None
        wanted = self._mac(_FORECAST_CONTEXT, namespace, name, seconds)
        return int(seconds) if hmac.compare_digest(given, wanted) else None

    def is_sealed(self, kind: str, obj: Mapping[str, Any]) -> bool:
        """``obj`` carries a valid name seal over what it says it is (its annotated identity, its try)."""
        meta = obj.get("metadata")
        identity = identity_of(obj)
        given = _annotations(obj).get(SEAL_ANNOTATION)
        if identity is None or not isinstance(given, str) or not isinstance(meta, Mapping):
            return False
        wanted = self.seal(kind, str(meta.get("namespace")), str(meta.get("name")), identity)
        return hmac.compare_digest(given, wanted)

    def uid_seal_state(self, kind: str, obj: Mapping[str, Any]) -> str:
        """``"valid"``, ``"missing"`` (created, not yet patched: its worker died in between) or ``"invalid"``
        (a seal over another uid: a copy re-created under the name)."""
        given = _annotations(obj).get(UID_SEAL_ANNOTATION)
        if not isinstance(given, str):
            return "missing"
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping) or not meta.get("uid"):
            return "invalid"
        wanted = self.uid_seal(kind, str(meta.get("namespace")), str(meta.get("name")), str(meta["uid"]))
        return "valid" if hmac.compare_digest(given, wanted) else "invalid"

    def is_sealed_child(self, obj: Mapping[str, Any]) -> bool:
        """``obj`` is a child Job of a sealed parent (a JobSet's): it carries its parent's seal (the parent's
        Job templates do, ``KindDescription.child_templates``), valid for the parent its kind's child label
        names. For what the UI shows; reattach reads the parent itself."""
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping):
            return False
        return any(
            self.is_sealed(parent.kind, {"metadata": {**meta, "name": name}})
            for parent, name in kinds.parent_names(obj)
        )


def sealed_only(objs: list[dict[str, Any]], seal: IdentitySeal, kind: str) -> list[dict[str, Any]]:
    """The objects that carry a valid seal: what the UI and the figures count as the task's. A child Job of
    a task's parent (a JobSet's Job) counts through its parent's seal; only objects of a kind that children
    are (``KindDescription.hosts_children``): another kind carrying a child label is not a child."""
    if kinds.describe(kind).hosts_children:
        return [o for o in objs if seal.is_sealed(kind, o) or seal.is_sealed_child(o)]
    return [o for o in objs if seal.is_sealed(kind, o)]
