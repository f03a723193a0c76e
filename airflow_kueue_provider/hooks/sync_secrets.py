"""``KueueHook``'s Secret write: a task's Secret created once, its body never in an error (it holds the
secret)."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from .retry import call_with_retry
from .sync_client import KueueApiError, SyncKueueClient


class SyncSecretCalls(SyncKueueClient):
    """Creating Secrets (mixed into ``KueueHook``)."""

    def create_secret(self, body: dict[str, Any]) -> bool:
        """Create a Secret; False when one of that name exists. An error never carries the request body
        (it holds the secret): only the status and reason."""
        core = client.CoreV1Api(self.api)
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            call_with_retry(lambda: core.create_namespaced_secret(namespace, body), "create Secret")
            return True
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise KueueApiError(
                f"could not create Secret {namespace}/{name}: HTTP {exc.status} {exc.reason}"
            ) from None
