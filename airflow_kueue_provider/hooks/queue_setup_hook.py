"""Applying declared Kueue objects (``kueue.queue_setup``): read the live object, report drift, server-side
apply. All of it with the connection's identity (``deploy/rbac/queue-admin.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from ..kueue.queue_setup import GROUP, VERSION, QueueObject, drift
from .kueue_hook import KueueHook
from .retry import call_with_retry, describe

FIELD_MANAGER = "airflow-kueue-provider-queues"
APPLY_PATCH = "application/apply-patch+yaml"


class KueueVersionTooOld(RuntimeError):
    """The cluster's Kueue does not serve v1beta2 (Kueue 0.15 and later do)."""


@dataclass(frozen=True)
class ApplyOutcome:
    ref: str
    action: str
    """``created``, ``updated``, ``unchanged``; with ``check_only``: ``missing``, ``drifted``, ``in sync``."""
    drift: tuple[str, ...] = ()


class KueueQueueSetupHook(KueueHook):
    def apply(self, obj: QueueObject, *, check_only: bool = False) -> ApplyOutcome:
        """Make the live object match its declaration (server-side apply, this provider's field manager,
        forced: the declaration is the source of truth) or, with ``check_only``, only say how it differs."""
        if self.kueue_version != VERSION:
            raise KueueVersionTooOld(
                f"the cluster's Kueue serves {GROUP}/{self.kueue_version}, not {VERSION}: upgrade Kueue to "
                "0.15 or later to apply queue declarations"
            )
        live = self._get_custom(obj.plural, obj.name, obj.namespace)
        differences = tuple(drift(obj.declared(), live)) if live is not None else ()
        if check_only:
            action = "missing" if live is None else ("drifted" if differences else "in sync")
            return ApplyOutcome(obj.ref, action, differences)
        if live is not None and not differences:
            return ApplyOutcome(obj.ref, "unchanged")
        self._server_side_apply(obj)
        return ApplyOutcome(obj.ref, "created" if live is None else "updated", differences)

    def _server_side_apply(self, obj: QueueObject) -> None:
        custom = client.CustomObjectsApi(self.api)
        options: dict[str, Any] = {
            "field_manager": FIELD_MANAGER,
            "force": True,
            "_content_type": APPLY_PATCH,
        }
        body = dict(obj.body)
        try:
            if obj.namespace:
                namespace = obj.namespace
                call_with_retry(
                    lambda: custom.patch_namespaced_custom_object(
                        GROUP, VERSION, namespace, obj.plural, obj.name, body, **options
                    ),
                    f"apply {obj.ref}",
                )
            else:
                call_with_retry(
                    lambda: custom.patch_cluster_custom_object(
                        GROUP, VERSION, obj.plural, obj.name, body, **options
                    ),
                    f"apply {obj.ref}",
                )
        except ApiException as exc:
            raise QueueApplyFailed(f"applying {obj.ref} failed: {describe(exc)}") from None


class QueueApplyFailed(RuntimeError):
    """The apiserver (or Kueue's webhook) refused a declared object; the message says why."""
