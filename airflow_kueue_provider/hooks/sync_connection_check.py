"""``KueueHook.test_connection``: can this connection reach the cluster, and does the cluster serve Kueue?

One discovery GET (``/apis/kueue.x-k8s.io``), no retry and a short timeout, so the answer comes at once; the
message names the cause (unreachable, credentials refused, no Kueue or one too old) and never a token."""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.rest import ApiException

from . import kueue_api
from .sync_client import SyncKueueClient

TEST_TIMEOUT_SECONDS = 10


class SyncConnectionCheck(SyncKueueClient):
    def test_connection(self) -> tuple[bool, str]:
        """``(ok, message)``: the Kueue API version this provider would use, or why there is none."""
        try:
            api = self.api
            server = str(api.configuration.host)
            resp: Any = api.call_api(
                f"/apis/{kueue_api.KUEUE_GROUP}",
                "GET",
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=TEST_TIMEOUT_SECONDS,
                header_params={"Accept": "application/json"},
            )
        except ApiException as exc:
            return False, _refusal(self.kubernetes_conn_id, exc)
        except Exception as exc:  # a connection refused, a DNS or TLS failure, a malformed kubeconfig
            return False, (
                f"connection {self.kubernetes_conn_id!r}: the cluster is unreachable or the connection is "
                f"malformed ({type(exc).__name__}): check its kubeconfig / in-cluster settings"
            )
        raw = resp[0] if isinstance(resp, tuple) else resp
        try:
            version = kueue_api.pick_version(json.loads(raw.data))
        except Exception as exc:  # UnsupportedKueueVersion, or an answer that is not the group's JSON
            return False, f"{server} serves {kueue_api.KUEUE_GROUP} in no version this provider reads: {exc}"
        return True, f"connected to {server}: Kueue serves {kueue_api.KUEUE_GROUP}/{version}"


def _refusal(conn_id: str, exc: ApiException) -> str:
    if exc.status == 404:
        return (
            f"connection {conn_id!r} reaches the cluster, which serves no {kueue_api.KUEUE_GROUP}: install "
            "Kueue (v0.15 or later, docs/compatibility.md)"
        )
    if exc.status in (401, 403):
        return (
            f"connection {conn_id!r}: the cluster refused its credentials (HTTP {exc.status}): check the "
            "token, client certificate or kubeconfig user, and that it may read API discovery"
        )
    return f"connection {conn_id!r}: the cluster answered HTTP {exc.status} {exc.reason}"
