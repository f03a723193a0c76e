"""Pod logs streamed into the task log while the Job runs (``get_logs=True``): chosen indexes only, at most
``LOG_MAX_PODS`` pods, a bytes-per-second cap, every line through Airflow's secrets masker.

It runs beside the trigger's loop (deferred: in the triggerer, whose trigger log lines reach the task's log;
blocking: in the worker) and never decides the task: a log that cannot be read is a note, not a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from typing import Any

from ..airflow_compat import AirflowFailException
from ..hooks.async_client import api_status
from ..hooks.async_pod_logs import AsyncPodLogs
from ..hooks.cluster_target import ClusterTarget
from ..kueue.errors import KueueProviderError
from ..kueue.index_set import IndexSet
from ..kueue.names import INDEX_ANNOTATION

LOG_MAX_PODS = 10
"""At most this many pods' logs per trigger (a retried index's new pod counts as one more)."""
DEFAULT_LOG_BYTES_PER_SECOND = 16 * 1024
"""All streamed pods together; lines past it are dropped and counted, so a chatty shard cannot flood the
task log (or the triggerer)."""
LOG_LINE_MAX_CHARS = 4000
"""A longer line is cut (one line is one task-log record)."""
POD_LIST_SECONDS = 5.0
"""How often new pods of the chosen indexes are looked for."""
DRAIN_SECONDS = 10.0
"""At the Job's end, how long the streams may take to deliver their last lines."""
RETRY_SECONDS = 2.0
MAX_READ_ERRORS = 5
MAIN_CONTAINER = "main"


class BadLogParams(AirflowFailException, KueueProviderError):
    """``log_indexes`` or ``log_bytes_per_second`` cannot be used (raised when the DAG is parsed)."""


@dataclass(frozen=True)
class LogStreamPlan:
    """What to stream: ``indexes`` (an interval string), the cap, and the container (None: ``main``, else
    the pod's first)."""

    indexes: str
    bytes_per_second: int = DEFAULT_LOG_BYTES_PER_SECOND
    container: str | None = None

    @classmethod
    def parse(cls, task_id: str, indexes: str | int, bytes_per_second: int) -> LogStreamPlan:
        try:
            chosen = IndexSet.parse(str(indexes))
        except ValueError as exc:
            raise BadLogParams(
                f"{task_id}: log_indexes {indexes!r}: {exc}; give e.g. '0' or '0,5-7'"
            ) from None
        if not chosen or len(chosen) > LOG_MAX_PODS:
            raise BadLogParams(
                f"{task_id}: log_indexes {indexes!r} selects {len(chosen)} indexes; choose 1 to "
                f"{LOG_MAX_PODS} (e.g. '0' or '0-3')"
            )
        if (
            isinstance(bytes_per_second, bool)
            or not isinstance(bytes_per_second, int)
            or bytes_per_second < 1
        ):
            raise BadLogParams(
                f"{task_id}: log_bytes_per_second must be a positive integer, not {bytes_per_second!r}"
            )
        return cls(str(chosen), bytes_per_second)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LogStreamPlan:
        return cls(str(data["indexes"]), int(data["bytes_per_second"]), data.get("container"))


def masker() -> Callable[[Any], Any]:
    """Airflow's ``redact``: ``airflow.sdk.log`` from 3.3, ``airflow.sdk.execution_time.secrets_masker``
    before."""
    try:
        return importlib.import_module("airflow.sdk.log").redact  # type: ignore[no-any-return]
    except (ImportError, AttributeError):
        return importlib.import_module("airflow.sdk.execution_time.secrets_masker").redact  # type: ignore[no-any-return]


class LogStream:
    """The streams of one trigger: ``running()`` around its loop."""

    def __init__(
        self,
        plan: LogStreamPlan,
        target: ClusterTarget,
        namespace: str,
        job: tuple[str, str | None],
        log: Any,
    ) -> None:
        self.plan, self.target, self.namespace = plan, target, namespace
        self.job_name, self.job_uid = job
        self.log = log
        self._indexes = IndexSet.parse(plan.indexes)
        self._followed: set[str] = set()
        self._followers: set[asyncio.Task[None]] = set()
        self._stop = asyncio.Event()
        self._tokens, self._refilled = float(plan.bytes_per_second), time.monotonic()
        self._dropped, self._noted = 0, 0.0
        self._redact = masker()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        task = asyncio.create_task(self._run())
        try:
            yield
        finally:
            self._stop.set()
            try:
                await asyncio.wait_for(asyncio.shield(task), DRAIN_SECONDS + 5)
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()
            except Exception:  # a log is a courtesy: never what ends the task
                logging.getLogger(__name__).exception("streaming pod logs failed")

    async def _run(self) -> None:
        async with AsyncPodLogs(self.target).session() as logs:
            while True:
                stopping = self._stop.is_set()
                await self._start_new(logs)  # once more after the end: pods that ran between two looks
                if stopping:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), POD_LIST_SECONDS)
            if self._followers:
                _, late = await asyncio.wait(self._followers, timeout=DRAIN_SECONDS)
                for follower in late:
                    follower.cancel()
            self._note_dropped(force=True)

    async def _start_new(self, logs: AsyncPodLogs) -> None:
        try:
            pods = await logs.job_pods(self.namespace, self.job_name, self.job_uid)
        except Exception as exc:
            self.log.warning("pod logs: could not list the Job's pods (%s); trying again", exc)
            return
        for pod in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or ""):
            meta = pod["metadata"]
            index = (meta.get("annotations") or {}).get(INDEX_ANNOTATION)
            if meta["uid"] in self._followed or index is None or int(index) not in self._indexes:
                continue
            if len(self._followed) >= LOG_MAX_PODS:
                self.log.info(
                    "pod logs: %d pods streamed, the most per task; %s is not", LOG_MAX_PODS, meta["name"]
                )
                self._followed.add(meta["uid"])
                continue
            self._followed.add(meta["uid"])
            follower = asyncio.create_task(self._follow(logs, pod, f"index {index} {meta['name']}"))
            self._followers.add(follower)
            follower.add_done_callback(self._followers.discard)

    async def _follow(self, logs: AsyncPodLogs, pod: dict[str, Any], prefix: str) -> None:
        name, read, errors = pod["metadata"]["name"], 0, 0
        container = self.plan.container or _container_of(pod)
        while True:
            try:
                async for line in logs.follow_log(self.namespace, name, container, skip=read):
                    read += len(line)
                    self._emit(prefix, line)
                return  # the container ended: its log is complete
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                status = api_status(exc)
                if status == 404:
                    return  # the pod is gone
                if status != 400:  # 400: not started yet (waiting), asked again until it runs
                    errors += 1
                if errors > MAX_READ_ERRORS:
                    self.log.warning("pod logs: %s: stopped reading (%s)", prefix, exc)
                    return
                await asyncio.sleep(RETRY_SECONDS)

    def _emit(self, prefix: str, line: bytes) -> None:
        now = time.monotonic()
        cap = self.plan.bytes_per_second
        self._tokens = min(float(cap), self._tokens + (now - self._refilled) * cap)
        self._refilled = now
        if len(line) > self._tokens:
            self._dropped += len(line)
            self._note_dropped()
            return
        self._tokens -= len(line)
        text = line.decode("utf-8", errors="replace").rstrip("\r\n")[:LOG_LINE_MAX_CHARS]
        self.log.info("[%s] %s", prefix, self._redact(text))

    def _note_dropped(self, force: bool = False) -> None:
        if self._dropped and (force or time.monotonic() - self._noted >= 10):
            self.log.info(
                "pod logs: %d bytes not shown (log_bytes_per_second=%d)",
                self._dropped,
                self.plan.bytes_per_second,
            )
            self._dropped, self._noted = 0, time.monotonic()


def _container_of(pod: dict[str, Any]) -> str | None:
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    if len(names) <= 1:
        return None
    return MAIN_CONTAINER if MAIN_CONTAINER in names else names[0]


@asynccontextmanager
async def streaming_logs(
    plan: dict[str, Any] | None, target: ClusterTarget, namespace: str, job: tuple[str, str | None], log: Any
) -> AsyncIterator[None]:
    """``LogStream.running()`` when the trigger has a plan; nothing otherwise."""
    if not plan:
        yield
        return
    async with LogStream(LogStreamPlan.from_dict(plan), target, namespace, job, log).running():
        yield
