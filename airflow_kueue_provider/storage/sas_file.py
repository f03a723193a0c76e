"""A SAS read from a file the kubelet keeps current: a pod's mounted checkpoint Secret.

A user-delegation SAS is short-lived and re-signed by the trigger into the Job's Secret; an env var from
that Secret is fixed when the container starts, a mounted Secret is not (the kubelet swaps the file within
about a minute). So the credential re-reads the file whenever it changed (one ``stat`` per request), and a
request refused with 401/403 waits a while for a newer file before the error stands (the kubelet's lag).
"""

from __future__ import annotations

import logging
import os
import threading
import time

from azure.core.credentials import AzureSasCredential

from .blob_errors import BlobConfigError, register_secret

log = logging.getLogger("airflow_kueue_provider.storage.blob_store")

REFRESH_WAIT_SECONDS = 120.0  # the kubelet's sync period (60 s) plus its cache's TTL, with room
POLL_SECONDS = 1.0


class FileSasCredential(AzureSasCredential):
    """An ``AzureSasCredential`` whose signature is the content of ``path``, re-read when the file changes
    (its mtime, size or inode). The Blob SDK asks for ``signature`` on every request."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._version: tuple[int, int, int] | None = None
        super().__init__(self._read())

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)  # follows the kubelet's ..data symlink to the current file
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def _read(self) -> str:
        """The file's token (no leading ``?``); BlobConfigError when there is none to read."""
        version = self._stat()
        try:
            with open(self.path, encoding="utf-8") as handle:
                token = handle.read().strip().lstrip("?")
        except OSError as exc:
            raise BlobConfigError(
                f"cannot read the checkpoint SAS file {self.path}: {exc.strerror}"
            ) from None
        if not token:
            raise BlobConfigError(f"the checkpoint SAS file {self.path} is empty")
        register_secret(token)
        self._version = version
        return token

    def _reload_if_changed(self) -> bool:
        with self._lock:
            version = self._stat()
            if version is None or version == self._version:
                return False
            try:
                token = self._read()
            except BlobConfigError as exc:  # mid-swap or gone: keep the last good one
                log.warning("%s; keeping the SAS read before", exc)
                return False
            changed = token != self._signature
            self._signature = token
            return changed

    @property
    def signature(self) -> str:
        self._reload_if_changed()
        return self._signature

    def wait_for_new(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (default ``REFRESH_WAIT_SECONDS``) for the file to hold another SAS
        than the one in use (after a 401/403: an expired one the trigger has re-signed, not yet synced by
        the kubelet)."""
        deadline = time.monotonic() + (REFRESH_WAIT_SECONDS if timeout is None else timeout)
        while True:
            if self._reload_if_changed():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(POLL_SECONDS, left))


def new_sas_after(
    exc: BaseException, credential: object, deadline: float | None, renewals: int, what: str
) -> bool:
    """After a failed request: whether it was a 401/403 with a file SAS and a new SAS arrived (waiting for
    it until ``deadline``, a ``time.monotonic`` value, if any). At most twice per call (``renewals``), so a
    SAS refused for good fails."""
    status = getattr(exc, "status_code", None)
    if status not in (401, 403) or not isinstance(credential, FileSasCredential) or renewals >= 2:
        return False
    wait = (
        REFRESH_WAIT_SECONDS if deadline is None else min(REFRESH_WAIT_SECONDS, deadline - time.monotonic())
    )
    if wait <= 0:
        return False
    log.warning("%s was refused (HTTP %s): waiting up to %.0f s for a new SAS", what, status, wait)
    return credential.wait_for_new(wait)
