"""Synchronous Kubernetes + Kueue calls for operators and the UI (submit, reattach, inspect, delete).

:class:`KueueHook` is the one hook users and the UI construct: a client session (``sync_client``: the
connection, JSON LISTs, the Kueue version) with the calls of each kind of object mixed in -- queues and the
visibility API (``sync_queues``), Jobs and a task instance's Jobs (``sync_jobs``), pods and their logs
(``sync_pods``), Events (``sync_events``), Workloads (``sync_workloads``) and Secrets
(``sync_secrets``); ``test_connection`` (``sync_connection_check``).
"""

from __future__ import annotations

from .sync_client import DELETE_ATTEMPTS, KueueApiError
from .sync_connection_check import SyncConnectionCheck
from .sync_events import SyncEventCalls
from .sync_jobs import SyncJobCalls
from .sync_pods import SyncPodCalls, no_logs_note, pod_log_text
from .sync_queues import SyncQueueCalls
from .sync_secrets import SyncSecretCalls
from .sync_workloads import SyncWorkloadCalls

__all__ = ["DELETE_ATTEMPTS", "KueueApiError", "KueueHook", "no_logs_note", "pod_log_text"]


class KueueHook(
    SyncQueueCalls,
    SyncJobCalls,
    SyncEventCalls,
    SyncPodCalls,
    SyncWorkloadCalls,
    SyncSecretCalls,
    SyncConnectionCheck,
):
    """Kueue-aware calls over the cncf ``kubernetes`` connection (in-cluster, kubeconfig file, context).

    Objects come back as plain dicts (the API's JSON), which is what the pure domain model reads.
    """
