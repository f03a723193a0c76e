"""Applying declared Kueue objects (``kueue.queues.queue_setup``): read the live object, adopt fields
written by client-side calls, preview the apply (a server-side dry run), report what it would change and whose
fields it would take, then server-side apply as this provider's field manager. All of it with the connection's
identity (``deploy/rbac/queue-admin.yaml``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from ..kueue.errors import KueueProviderError
from ..kueue.identity.queue_ownership import (
    PREVIOUS_MANAGERS,
    FieldConflict,
    adopted_managed_fields,
    applied_changes,
    conflicts_of,
    previous_managers_in,
)
from ..kueue.queues.queue_setup import GROUP, TOP_LEVEL_FIELDS, VERSION, QueueObject, drift
from .kueue_hook import KueueHook
from .retry import call_with_retry, describe

log = logging.getLogger(__name__)

FIELD_MANAGER = "airflow-kueue-provider-queues"
"""This provider's field manager: the owner of every declared field, stable across versions."""
APPLY_PATCH = "application/apply-patch+yaml"
JSON_PATCH = "application/json-patch+json"


class KueueVersionTooOld(RuntimeError, KueueProviderError):
    """The cluster's Kueue does not serve v1beta2 (Kueue 0.15 and later do)."""


class QueueApplyFailed(RuntimeError, KueueProviderError):
    """The apiserver (or Kueue's webhook) refused a declared object; the message says why."""


@dataclass(frozen=True)
class ApplyOutcome:
    ref: str
    action: str
    """``created``, ``updated``, ``unchanged``, ``conflict`` (other managers own declared fields; nothing
    written without ``force``); with ``check_only``: ``missing``, ``drifted``, ``in sync``."""
    drift: tuple[str, ...] = ()
    conflicts: tuple[FieldConflict, ...] = ()


class _Conflicted(Exception):
    def __init__(self, conflicts: tuple[FieldConflict, ...]) -> None:
        super().__init__(", ".join(map(str, conflicts)))
        self.conflicts = conflicts


class KueueQueueSetupHook(KueueHook):
    def apply(
        self,
        obj: QueueObject,
        *,
        check_only: bool = False,
        force: bool = False,
        adopt_managers: Sequence[str] = PREVIOUS_MANAGERS,
    ) -> ApplyOutcome:
        """Make the live object what its declaration says (server-side apply as ``FIELD_MANAGER``: a field
        removed from the declaration is removed) or, with ``check_only``, only say how it differs. Declared
        fields other managers own are taken only with ``force`` (and logged); without it the object is left
        as it is and the outcome names them. Fields the ``adopt_managers`` wrote with client-side calls become
        this manager's first (once, as Kubernetes' upgrade from client-side apply does)."""
        if self.kueue_version != VERSION:
            raise KueueVersionTooOld(
                f"the cluster's Kueue serves {GROUP}/{self.kueue_version}, not {VERSION}: upgrade Kueue to "
                "0.15 or later to apply queue declarations"
            )
        live = self._get_custom(obj.plural, obj.name, obj.namespace)
        if live is None:
            if check_only:
                return ApplyOutcome(obj.ref, "missing")
            self._call(obj, "apply", dict(obj.body), APPLY_PATCH, force=False)
            return ApplyOutcome(obj.ref, "created")
        managed = live["metadata"].get("managedFields") or []
        adopted = adopted_managed_fields(managed, adopt_managers, FIELD_MANAGER)
        if adopted is not None:
            previous = previous_managers_in(managed, adopt_managers)
            if check_only:
                note = (
                    f"metadata.managedFields: written by client-side calls ({', '.join(previous)}), not "
                    "yet owned by server-side apply: the next apply takes them over and removes what is not "
                    "declared"
                )
                return ApplyOutcome(obj.ref, "drifted", (*drift(obj.declared(), live), note))
            live = self._adopt(obj, live, adopted)
            log.info(
                "%s: took over the fields %s wrote (client-side) as %s", obj.ref, previous, FIELD_MANAGER
            )
        conflicts: tuple[FieldConflict, ...] = ()
        try:
            preview = self._call(obj, "preview", dict(obj.body), APPLY_PATCH, force=False, dry_run=True)
        except _Conflicted as exc:
            conflicts = exc.conflicts
            if not force:
                action = "drifted" if check_only else "conflict"
                return ApplyOutcome(obj.ref, action, tuple(drift(obj.declared(), live)), conflicts)
            preview = self._call(obj, "preview", dict(obj.body), APPLY_PATCH, force=True, dry_run=True)
        keys = TOP_LEVEL_FIELDS.get(obj.kind, ("spec",))
        differences = tuple(applied_changes(live, preview, obj.body, keys))
        if check_only:
            return ApplyOutcome(obj.ref, "drifted" if differences else "in sync", differences, conflicts)
        if not differences and not conflicts:
            return ApplyOutcome(obj.ref, "unchanged")
        if conflicts:
            log.warning("%s: force=True takes %s", obj.ref, ", ".join(map(str, conflicts)))
        try:
            self._call(obj, "apply", dict(obj.body), APPLY_PATCH, force=bool(conflicts))
        except _Conflicted as exc:  # another manager wrote a declared field since the preview
            return ApplyOutcome(obj.ref, "conflict", differences, exc.conflicts)
        return ApplyOutcome(obj.ref, "updated", differences, conflicts)

    def _adopt(self, obj: QueueObject, live: dict[str, Any], managed: list[dict[str, Any]]) -> dict[str, Any]:
        """Write ``managed`` as the object's managedFields, only over the version read (a JSON patch that
        tests the resourceVersion: a concurrent write makes it fail rather than lose that write's owner)."""
        patch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": live["metadata"]["resourceVersion"]},
            {"op": "replace", "path": "/metadata/managedFields", "value": managed},
        ]
        return self._call(obj, "take over the client-side fields of", patch, JSON_PATCH)

    def _call(
        self,
        obj: QueueObject,
        what: str,
        body: Any,
        content_type: str,
        *,
        force: bool | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        custom = client.CustomObjectsApi(self.api)
        options: dict[str, Any] = {"field_manager": FIELD_MANAGER, "_content_type": content_type}
        if force is not None:
            options["force"] = force
        if dry_run:
            options["dry_run"] = "All"
        try:
            if obj.namespace:
                namespace = obj.namespace
                result = call_with_retry(
                    lambda: custom.patch_namespaced_custom_object(
                        GROUP, VERSION, namespace, obj.plural, obj.name, body, **options
                    ),
                    f"{what} {obj.ref}",
                )
            else:
                result = call_with_retry(
                    lambda: custom.patch_cluster_custom_object(
                        GROUP, VERSION, obj.plural, obj.name, body, **options
                    ),
                    f"{what} {obj.ref}",
                )
        except ApiException as exc:
            if exc.status == 409 and content_type == APPLY_PATCH:
                found = conflicts_of(_status(exc))
                if found:
                    raise _Conflicted(found) from None
            raise QueueApplyFailed(f"{what} {obj.ref} failed: {describe(exc)}") from None
        return dict(result or {})  # a create (201) is not deserialized by the client: nothing to read


def _status(exc: ApiException) -> dict[str, Any]:
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}
