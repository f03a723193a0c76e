"""Replace the SAS in a Job's checkpoint Secret from a trigger (kubernetes_asyncio, off no event loop).

A user-delegation SAS cannot be extended, so the trigger re-signs it and writes the new token into the
Secret its pods mount. The write is one JSON patch whose first operation tests that the Secret is still the
one owned by the followed object (its ownerReference's uid): a namesake made since is never written. It
needs only ``patch`` on Secrets (no ``get``: the worker's identity never reads a Secret back).
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from ..kueue.names import SAS_SECRET_KEY
from .async_client import AsyncKueueSession, bind_clients, checked
from .cluster_target import ClusterTarget
from .retry import acall_with_retry

if TYPE_CHECKING:  # bound at run time by async_client's _import_clients() (see bind_clients)
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio.client.rest import ApiException

    from .async_client import REQUEST_TIMEOUT
    from .kueue_hook import KueueApiError

bind_clients(globals())

NOT_OURS = frozenset({404, 409, 422})
"""Gone (404), or the test of its owner's uid failed (422; 409 from some apiservers): not this Job's."""


def sas_patch(owner_uid: str, token: str) -> list[dict[str, str]]:
    """The JSON patch: only while the Secret is owned by ``owner_uid``, its SAS becomes ``token``."""
    return [
        {"op": "test", "path": "/metadata/ownerReferences/0/uid", "value": owner_uid},
        {
            "op": "replace",
            "path": f"/data/{SAS_SECRET_KEY}",
            "value": base64.b64encode(token.encode()).decode(),
        },
    ]


async def replace_sas(target: ClusterTarget, namespace: str, name: str, owner_uid: str, token: str) -> bool:
    """Write ``token`` into the Secret ``namespace/name`` owned by ``owner_uid``; False when it is gone or
    is not that object's. An error names the Secret, the status and the reason, never the request (it holds
    the token)."""
    async with AsyncKueueSession(target).session() as session:
        core = aclient.CoreV1Api(session.api)
        body = sas_patch(owner_uid, token)

        async def call() -> None:
            resp = await checked(
                core.patch_namespaced_secret(
                    name, namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
                )
            )
            (resp[0] if isinstance(resp, tuple) else resp).release()  # the Secret back: not parsed, not kept

        try:
            await acall_with_retry(call, "patch Secret")
        except ApiException as exc:
            if exc.status in NOT_OURS:
                return False
            raise KueueApiError(
                f"could not write the SAS into Secret {namespace}/{name}: HTTP {exc.status} {exc.reason}"
            ) from None
    return True
