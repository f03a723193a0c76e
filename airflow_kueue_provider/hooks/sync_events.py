"""``KueueHook``'s Event calls: one object's Events (a field-selected LIST), and the LIST and WATCH of one
kind's Events in a namespace that the UI's shared index of Events is fed by (``watch.event_index``)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator
from typing import Any

from kubernetes import client

from .retry import call_with_retry
from .sync_client import SyncKueueClient

WATCH_CONNECT_SECONDS = 10.0
"""How long opening the WATCH may take."""
WATCH_READ_SECONDS = 130.0
"""A WATCH silent this long is dead: the apiserver sends a BOOKMARK about once a minute on an idle watch."""


def kind_selector(kind: str, skip_reasons: Iterable[str] = ()) -> str:
    """The field selector of the Events on objects of ``kind``, but those of ``skip_reasons`` (the
    apiserver filters them out, so they are neither sent nor kept)."""
    return ",".join([f"involvedObject.kind={kind}", *(f"reason!={reason}" for reason in skip_reasons)])


class SyncEventCalls(SyncKueueClient):
    def events_of(self, namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
        """The (core/v1) Events recorded on one object, e.g. a Job or its Workload."""
        core = client.CoreV1Api(self.api)
        selector = f"involvedObject.kind={kind},involvedObject.name={name}"
        return self._items(
            functools.partial(core.list_namespaced_event, namespace, field_selector=selector), "list Events"
        )

    def kind_events(
        self, namespace: str, kind: str, skip_reasons: Iterable[str] = (), limit: int | None = None
    ) -> tuple[list[dict[str, Any]], str, bool]:
        """(the Events recorded on objects of ``kind`` in ``namespace``, but those of ``skip_reasons``; the
        list's resourceVersion; whether there are more than ``limit``, which are then not read)."""
        core = client.CoreV1Api(self.api)
        selector = kind_selector(kind, skip_reasons)
        answer = call_with_retry(
            lambda: core.list_namespaced_event(
                namespace, field_selector=selector, limit=limit, _preload_content=False
            ),
            "list Events",
        )
        body = json.loads(answer.data)
        meta = body.get("metadata") or {}
        return (
            list(body.get("items") or []),
            str(meta.get("resourceVersion") or ""),
            bool(meta.get("continue")),
        )

    def watch_kind_events(
        self, namespace: str, kind: str, resource_version: str, seconds: int, skip_reasons: Iterable[str] = ()
    ) -> Iterator[dict[str, Any]]:
        """The changes to ``kind_events`` after ``resource_version``, as the WATCH sends them (``type``,
        ``object``; BOOKMARKs too), for at most ``seconds``. Raises ``ApiException`` as the call does; an
        ``ERROR`` entry (410 Gone: the version is too old) is yielded for the caller to list again."""
        core = client.CoreV1Api(self.api)
        answer = core.list_namespaced_event(
            namespace,
            field_selector=kind_selector(kind, skip_reasons),
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=resource_version,
            timeout_seconds=seconds,
            _preload_content=False,
            _request_timeout=(WATCH_CONNECT_SECONDS, WATCH_READ_SECONDS),
        )
        try:
            pending = b""
            for chunk in answer.stream(amt=None, decode_content=True):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
            if pending.strip():
                yield json.loads(pending)
        finally:
            answer.release_conn()
