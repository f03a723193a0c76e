"""A shard's checkpoints in Blob Storage, and the SIGTERM flush that fits the 30 s Spot eviction window.

Typical use (see ``sample_shard.py``)::

    with Shard.from_env() as shard:          # installs the SIGTERM handler; leaving the block restores it
        if shard.is_done():
            return
        state = shard.load() or {"next": 0}  # resume from the newest checkpoint
        for i in range(state["next"], n):
            work(i)
            with shard.critical():            # a SIGTERM waits until the block ends...
                record(i)
                state = {"next": i + 1}
                shard.latest = state          # ...and then flushes this (an attribute write: cheap)
            if (i + 1) % k == 0:
                shard.save(state)             # periodic checkpoint: one small upload
        shard.mark_done({"items": n})

On SIGTERM the handler writes ``shard.latest`` as one more checkpoint, in a helper thread bounded by
``grace_seconds - FLUSH_MARGIN_SECONDS``, then raises ``SystemExit(143)`` in the main thread. It never starts
a big upload: a state over ``MAX_CHECKPOINT_BYTES`` is refused by ``save`` and skipped by the flush.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timezone
from types import FrameType, TracebackType
from typing import Any, NoReturn, Protocol

from ..hooks.blob_store import (
    BlobPreconditionFailed,
    BlobStoreError,
    BlobStoreHook,
    BlobUnavailable,
    RetryPolicy,
    account_url_from_connection_string,
    redact,
)
from . import naming
from .env import CHECKPOINT_URL, CONNECTION_STRING, ShardEnv

log = logging.getLogger("airflow_kueue_provider.worker")

EXIT_SIGTERM = 143  # 128 + SIGTERM, what a shell reports for a process killed by SIGTERM
FLUSH_MARGIN_SECONDS = 2.0  # of the grace period, kept for serialising, thread start-up and process exit
MAX_CHECKPOINT_BYTES = 1 << 20
CHECKPOINT_FORMAT = 1
_SEQ_CONFLICTS = 5


class JsonStore(Protocol):
    """What a shard needs from storage (``BlobStoreHook`` satisfies it; tests use an in-memory one)."""

    def read_json(self, name: str) -> tuple[dict[str, Any] | None, str | None]: ...

    def write_json(
        self,
        name: str,
        data: Mapping[str, Any],
        *,
        if_match: str | None = None,
        if_none_match: bool = False,
        timeout: float | None = None,
    ) -> str: ...

    def list_names(self, prefix: str) -> list[tuple[str, datetime]]: ...

    def delete(self, name: str) -> bool: ...


class Shard:
    """One shard of an IndexedJob: its id, its checkpoints, how it resumes and how it stops on SIGTERM."""

    def __init__(
        self,
        shard_id: int,
        index: int,
        store: JsonStore,
        *,
        prefix: str,
        grace_seconds: float = 25.0,
        keep: int = 3,
        flush_store: JsonStore | None = None,
    ) -> None:
        """``flush_store`` (default ``store``) serves the SIGTERM flush; ``from_env`` gives it its own client
        so the flush never waits on a lock or connection the interrupted main thread holds."""
        naming.stale_seqs((), keep)  # validates keep
        self.shard_id, self.index, self.prefix = shard_id, index, prefix
        self.store, self.flush_store = store, flush_store or store
        self.grace_seconds, self.keep = grace_seconds, keep
        self.resumed_seq: int | None = None
        self._latest: dict[str, Any] | None = None
        self._seq = 0  # the highest checkpoint number known to be taken
        self._existing: list[int] = []  # checkpoint numbers known to exist (pruning candidates)
        self._critical = 0
        self._sigterm_at: float | None = None
        self._previous_handler: Any = None
        self._installed = False

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, handle_sigterm: bool = True, keep: int = 3
    ) -> Shard:
        """The shard this pod runs, from the variables the operator injects (see :mod:`.env`)."""
        env = ShardEnv.from_environ(os.environ if environ is None else environ)
        if env.connection_string:
            endpoint = account_url_from_connection_string(env.connection_string)
            if endpoint.rstrip("/") != env.account_url.rstrip("/"):
                log.warning(
                    "%s points at %s, %s at %s: using the connection string's endpoint",
                    CONNECTION_STRING,
                    redact(endpoint),
                    CHECKPOINT_URL,
                    env.account_url,
                )
        store = _store(env, RetryPolicy())
        flush_store = _store(
            env, RetryPolicy(attempts=20, base_delay=0.2, max_delay=2.0, request_timeout=10.0)
        )
        shard = cls(
            env.shard_id,
            env.index,
            store,
            prefix=env.prefix,
            grace_seconds=env.grace_seconds,
            keep=keep,
            flush_store=flush_store,
        )
        if handle_sigterm:
            shard.handle_sigterm()
        return shard

    # -- state -----------------------------------------------------------------------------------------------

    @property
    def latest(self) -> dict[str, Any] | None:
        """The state a SIGTERM flushes: set it after every unit of work (``save`` sets it too)."""
        return self._latest

    @latest.setter
    def latest(self, state: dict[str, Any] | None) -> None:
        self._latest = state

    def load(self) -> dict[str, Any] | None:
        """The newest checkpoint's state, or None on a fresh start; later saves continue its numbering."""
        folder = naming.shard_folder(self.prefix, self.shard_id)
        seqs = sorted(s for s in (naming.checkpoint_seq(n) for n, _ in self.store.list_names(folder)) if s)
        self._seq, self._existing = max([self._seq, *seqs]), seqs
        for seq in reversed(seqs):
            doc, _ = self.store.read_json(naming.checkpoint_name(self.prefix, self.shard_id, seq))
            if doc is not None and isinstance(doc.get("state"), dict):
                self.resumed_seq, self._latest = seq, doc["state"]
                log.info("shard %d resumes from checkpoint %d (%s)", self.shard_id, seq, doc.get("reason"))
                self._prune()
                return self._latest
        return None

    def save(self, state: Mapping[str, Any]) -> int | None:
        """Write ``state`` as the next checkpoint (one atomic upload) and delete all but the newest ``keep``.

        Returns its number, or None when Blob Storage stayed unavailable: the state remains ``latest`` and
        goes out with the next save or the SIGTERM flush. Raises ValueError over MAX_CHECKPOINT_BYTES.
        """
        self._latest = dict(state)
        try:
            seq = self._write(self._latest, "periodic", self.store, None)
        except BlobUnavailable as exc:
            log.warning("shard %d: checkpoint deferred: %s", self.shard_id, exc)
            return None
        self._prune()
        return seq

    def mark_done(self, output: Mapping[str, Any]) -> None:
        """Record that the shard finished, with a small JSON ``output`` (``done.json``)."""
        doc = {
            "format": CHECKPOINT_FORMAT,
            "shard_id": self.shard_id,
            "index": self.index,
            "finished_at": _now(),
            "output": dict(output),
        }
        self.store.write_json(naming.done_name(self.prefix, self.shard_id), doc)

    def is_done(self) -> bool:
        return self.store.read_json(naming.done_name(self.prefix, self.shard_id))[0] is not None

    def _write(self, state: dict[str, Any], reason: str, store: JsonStore, deadline: float | None) -> int:
        doc: dict[str, Any] = {
            "format": CHECKPOINT_FORMAT,
            "shard_id": self.shard_id,
            "index": self.index,
            "seq": 0,
            "reason": reason,
            "saved_at": _now(),
            "state": state,
        }
        size = len(json.dumps(doc, separators=(",", ":")))
        if size > MAX_CHECKPOINT_BYTES:
            raise ValueError(
                f"shard {self.shard_id}: checkpoint of {size} bytes exceeds {MAX_CHECKPOINT_BYTES}; keep the "
                "state small (write bulk results as their own blobs and checkpoint their names)"
            )
        for _ in range(_SEQ_CONFLICTS):
            self._seq += 1
            doc["seq"] = seq = self._seq
            timeout = None if deadline is None else max(0.1, deadline - time.monotonic())
            name = naming.checkpoint_name(self.prefix, self.shard_id, seq)
            try:  # write-once names: a second pod of this index never overwrites a checkpoint
                store.write_json(name, doc, if_none_match=True, timeout=timeout)
            except BlobPreconditionFailed:
                log.warning(
                    "shard %d: checkpoint %d exists already (another pod?); taking the next",
                    self.shard_id,
                    seq,
                )
                continue
            self._existing.append(seq)
            return seq
        raise BlobStoreError(
            f"shard {self.shard_id}: {_SEQ_CONFLICTS} checkpoint numbers in a row were taken"
        )

    def _prune(self) -> None:
        for seq in naming.stale_seqs(self._existing, self.keep):
            try:
                self.store.delete(naming.checkpoint_name(self.prefix, self.shard_id, seq))
            except BlobStoreError as exc:  # harmless: tried again after the next save
                log.warning("shard %d: could not delete checkpoint %d: %s", self.shard_id, seq, exc)
                return
            self._existing.remove(seq)

    # -- SIGTERM ---------------------------------------------------------------------------------------------

    @contextmanager
    def critical(self) -> Iterator[None]:
        """A block a SIGTERM must not split (e.g. "record item i" + "latest = next is i+1"): the flush runs
        when the block ends, within the same grace budget."""
        self._critical += 1
        try:
            yield
        finally:
            self._critical -= 1
            if not self._critical and self._sigterm_at is not None:
                self._stop()

    def handle_sigterm(self) -> None:
        """Install the SIGTERM handler (``from_env`` does); ``close()`` restores the previous one."""
        if not self._installed:
            self._previous_handler = signal.signal(signal.SIGTERM, self._on_sigterm)
            self._installed = True

    def flush(self, timeout: float) -> int | None:
        """Write ``latest`` now as one checkpoint within ``timeout`` seconds (what SIGTERM does).

        The upload runs in a daemon thread joined with the timeout, so a hung connection cannot hold the
        process past the grace period. Returns the checkpoint number, or None (nothing to write, too big,
        or failed).
        """
        state = self._latest
        if state is None or timeout <= 0:
            return None
        deadline = time.monotonic() + timeout
        outcome: list[int | BaseException] = []

        def work() -> None:
            try:
                outcome.append(self._write(state, "sigterm", self.flush_store, deadline))
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=work, name="checkpoint-flush", daemon=True)
        thread.start()
        thread.join(timeout + 0.2)
        if not outcome:
            log.error("shard %d: the flush did not finish within %.1fs", self.shard_id, timeout)
            return None
        if isinstance(outcome[0], BaseException):
            log.error("shard %d: the flush failed: %s", self.shard_id, redact(outcome[0]))
            return None
        return outcome[0]

    def close(self) -> None:
        """Restore the previous SIGTERM handler and close the store clients."""
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous_handler)
            self._installed = False
        for store in {id(self.store): self.store, id(self.flush_store): self.flush_store}.values():
            close = getattr(store, "close", None)
            if callable(close):
                close()

    def __enter__(self) -> Shard:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        if self._sigterm_at is not None:
            return  # already stopping
        self._sigterm_at = time.monotonic()
        if self._critical:
            log.warning("shard %d: SIGTERM; flushing when the critical block ends", self.shard_id)
            return
        self._stop()

    def _stop(self) -> NoReturn:
        assert self._sigterm_at is not None
        budget = self.grace_seconds - FLUSH_MARGIN_SECONDS - (time.monotonic() - self._sigterm_at)
        seq = self.flush(budget)
        took = time.monotonic() - self._sigterm_at
        if seq is None:
            log.error(
                "shard %d: SIGTERM, no checkpoint written (%.1fs); exit %d", self.shard_id, took, EXIT_SIGTERM
            )
        else:
            log.warning(
                "shard %d: SIGTERM, checkpoint %d written in %.2fs; exit %d",
                self.shard_id,
                seq,
                took,
                EXIT_SIGTERM,
            )
        raise SystemExit(EXIT_SIGTERM)


def _store(env: ShardEnv, retry: RetryPolicy) -> BlobStoreHook:
    """The SAS the operator gives the pod; else (local runs) a connection string; else the pod's identity."""
    if env.sas_token:
        return BlobStoreHook.from_sas(env.account_url, env.container, env.sas_token, retry=retry)
    if env.connection_string:
        return BlobStoreHook.from_connection_string(env.connection_string, env.container, retry=retry)
    return BlobStoreHook.from_account_url(env.account_url, env.container, retry=retry)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
