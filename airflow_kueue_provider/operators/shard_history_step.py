"""The Job kind's shard history (docs/shard-history.md): each finished attempt's shard lengths recorded as
its DAG run's night, and the history read back to pack the next run's shards.

Recording reads the done records of the shards the attempt completed (``run_seconds``, ``resumed``: the
worker SDK writes them; one listing says which exist, then they are read in parallel as ``task_results``
does). A shard without one (a program that does not use the SDK) takes its length from the pod that ran it
alone (``pod_run_lengths``: the Job's pods in pages, at most ``MAX_TIMED_PODS``, bound by its uid). The
lengths are merged into the task's history blob (``ShardHistoryStore``). It is a by-product: any failure is
a warning and never changes the task's outcome.

Loading happens at run time only (never when the DAG is parsed), once per task try, when checkpointing is
on and the DAG did not pin a shape (``shards_per_pod`` unset); a history of another shard count is not
used, so such a task packs as it always did.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..hooks.blob_store import BlobStoreHook
from ..hooks.kueue_api import pods_by_index
from ..hooks.shard_history_store import ShardHistoryStore
from ..kueue.checkpoints.learned_lengths import LearnedLengths
from ..kueue.checkpoints.ledger import SUCCEEDED
from ..kueue.checkpoints.packing_choice import PackingChoice
from ..kueue.checkpoints.pod_run_lengths import observed_pod_start, shard_lengths_from_pods
from ..kueue.checkpoints.shard_blob_names import done_name
from ..kueue.checkpoints.shard_history import MAX_HISTORY_SHARDS, ShardHistory
from ..kueue.identity.airflow_identity import AirflowIdentity
from ..kueue.index_set import IndexSet
from ..kueue.progress.forecast import start_cost_of
from ..kueue.progress.trigger_event import KueueEvent
from ..kueue.spec.job_template import template_main_container
from ..storage.blob_errors import BlobStoreError
from .checkpointing import CheckpointSession

if TYPE_CHECKING:
    from ..hooks.kind_client import KindClient
    from ..kueue.checkpoints.ledger import Attempt, RunLedger
    from ..kueue.checkpoints.shard_packing import ShardPacks
    from .checkpoint_config import Checkpointing

HISTORY_READERS = 8
"""Done records read at once when an attempt's lengths are recorded (as ``task_results.READERS``)."""
HISTORY_RESULT_KEY = "shard_history"
MAX_TIMED_PODS = 5_000
"""Pods read at most (in pages of 500) to time a Job's shards from: the rest go unlearned that night."""

_TryKey = tuple[str, str, str, int, int]


def _key(identity: AirflowIdentity) -> _TryKey:
    return identity.dag_id, identity.run_id, identity.task_id, identity.map_index, identity.try_number


def read_durations(session: CheckpointSession, shard_ids: IndexSet) -> tuple[dict[int, float], IndexSet]:
    """``({shard id: run_seconds}, resumed ids)`` from the done records of ``shard_ids`` (only those the
    listing shows: a program without the SDK writes none); a record without a usable figure (written by an
    SDK before ``run_seconds``, or forged) is left out."""

    def read(shard_id: int) -> tuple[int, Any]:
        doc, _ = container.read_json(done_name(session.prefix, shard_id))
        return shard_id, doc

    durations: dict[int, float] = {}
    resumed: list[int] = []
    with (
        session.hook.container_hook(session.shard_container) as container,
        ThreadPoolExecutor(max_workers=HISTORY_READERS) as pool,
    ):
        for shard_id, doc in pool.map(read, list(shard_ids & session.done_shards())):
            seconds = doc.get("run_seconds") if isinstance(doc, dict) else None
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
                continue
            durations[shard_id] = float(seconds)
            if doc.get("resumed") is True:
                resumed.append(shard_id)
    return durations, IndexSet.from_indexes(resumed)


def clean_pod_start(attempt: Attempt, durations: Mapping[int, float]) -> float | None:
    """What each pod of ``attempt`` cost beside its shards' lengths (``start_cost_of``), from a clean
    attempt only: it succeeded without an eviction, finished every shard it ran, and each one's length is
    known; else None (the running time would measure the disruption, not the pods)."""
    figures = attempt.figures
    clean = attempt.status == SUCCEEDED and attempt.evictions == 0 and attempt.completed == attempt.shards
    if not clean or figures is None or not figures.running_seconds or not figures.pods:
        return None
    if any(shard not in durations for shard in attempt.shards):
        return None
    packs = attempt.packs
    works = [sum(durations[s] for s in packs.shards_of_index(i)) for i in range(packs.index_count)]
    return start_cost_of(works, figures.pods, figures.running_seconds)


class ShardHistoryStep:
    """Mixed into the Job kind's manifest part: the history read for packing (and the forecast), and the
    attempt's lengths recorded when it ends."""

    shards_per_pod: int | None
    _checkpointing: Checkpointing | None
    if TYPE_CHECKING:
        log: Any
        task_id: str
        _identity: AirflowIdentity | None

        def _client(self) -> KindClient: ...

        def _template(self) -> Mapping[str, Any] | None: ...

        def _shard_count(self) -> int: ...

    def _history_place(self) -> tuple[AirflowIdentity, Checkpointing] | None:
        """Whose history and where, when this try keeps one: None before the try's identity is known (at
        parse time), without checkpointing, or with a pinned ``shards_per_pod``."""
        identity: AirflowIdentity | None = getattr(self, "_identity", None)
        config = self._checkpointing
        if identity is None or config is None or self.shards_per_pod is not None:
            return None
        return identity, config

    def _shard_history(self) -> ShardHistory | None:
        """The task's history, read once per try (None without a place, ``_history_place``, or when it
        cannot be read)."""
        if (place := self._history_place()) is None:
            return None
        identity, config = place
        cached: tuple[_TryKey, ShardHistory | None] | None = getattr(self, "_history_read", None)
        if cached is not None and cached[0] == _key(identity):
            return cached[1]
        history = None
        try:
            with BlobStoreHook(config.conn_id, config.container) as hook:
                history = ShardHistoryStore(
                    hook, identity.dag_id, identity.task_id, identity.map_index
                ).read()
        except BlobStoreError as exc:
            self.log.warning("could not read the shard history (%s); packing without it", exc)
        self._history_read = (_key(identity), history)
        return history

    def _learn_wait_error(self, seconds: float) -> None:
        """Night ``identity.run_id``'s forecast error (``forecast_step.model_error``) into the history, which
        the next nights' forecasts add to a wait; a failure is a warning (a by-product of the run)."""
        if (place := self._history_place()) is None:
            return  # no history is kept for this task
        identity, config = place
        try:
            with BlobStoreHook(config.conn_id, config.container) as hook:
                store = ShardHistoryStore(hook, identity.dag_id, identity.task_id, identity.map_index)
                store.merge_wait_error(identity.run_id, self._shard_count(), seconds)
        except Exception as exc:  # never the task's outcome
            self.log.warning("could not record the forecast's error in the shard history (%s)", exc)
            return
        word = "later" if seconds >= 0 else "sooner"
        self.log.info(
            "shard history: the run ended %.0f s %s than the forecast's model said; the next nights' "
            "forecasts add that to their wait",
            abs(seconds),
            word,
        )

    def _learned_lengths(self, shard_count: int) -> LearnedLengths | None:
        """What earlier nights taught about this task's ``shard_count`` shards, or None (no history, or one
        of another shard count: the task then packs as if there were none)."""
        history = self._shard_history()
        learned = history.learned() if history is not None else None
        return learned if learned is not None and learned.fits(shard_count) else None

    def _with_history(self, choice: PackingChoice, shard_count: int) -> PackingChoice:
        """``choice`` packing from the learned lengths when there are some (logged once per try)."""
        learned = self._learned_lengths(shard_count)
        if learned is None:
            return choice
        key = _key(self._identity) if self._identity is not None else None  # set: there is a history
        if getattr(self, "_history_logged", None) != key:
            self._history_logged = key
            if not learned.packable:
                self.log.info(
                    "shard history: %s, from pod times (the program writes no done records): for the "
                    "forecast only; one shard per pod, as stated",
                    learned.describe(),
                )
            else:
                self.log.info("packing from shard history: %s", learned.describe())
        return replace(choice, learned=learned) if learned.packable else choice

    def _history_result(self, shard_count: int) -> dict[str, Any]:
        """``{"shard_history": {"nights": [...], "shards_learned": n}}`` when packing used history (the
        forecast's record says its own nights)."""
        learned = self._learned_lengths(shard_count)
        if learned is None or not learned.packable:
            return {}
        return {HISTORY_RESULT_KEY: {"nights": list(learned.nights), "shards_learned": len(learned.seconds)}}

    def _record_history(
        self, identity: AirflowIdentity, shards: object, ledger: RunLedger | None, event: KueueEvent
    ) -> None:
        """Merge the shards the event's Job completed in its attempt into the history as this DAG run's
        night; a failure is a warning (the history is a by-product of the run)."""
        if not isinstance(shards, CheckpointSession) or ledger is None:
            return
        attempt = ledger.attempt(event.name)
        if attempt is None:
            return
        try:
            count = shards.shard_count
            durations, resumed = (
                read_durations(shards, attempt.completed) if count <= MAX_HISTORY_SHARDS else ({}, IndexSet())
            )
            untimed = attempt.completed - resumed - IndexSet.from_indexes(durations)
            pods = self._job_pods(event, attempt.packs, untimed) if count <= MAX_HISTORY_SHARDS else {}
            main = self._main_container()
            from_pods = shard_lengths_from_pods(pods, attempt.packs, untimed, main) if pods else {}
            durations = {**from_pods, **durations}
            store = ShardHistoryStore(shards.hook, identity.dag_id, identity.task_id, identity.map_index)
            pod_start = clean_pod_start(attempt, durations)
            if pod_start is None and from_pods:  # an attempt with an eviction: the pods' own start
                pod_start = observed_pod_start(pods, main)
            store.merge_night(identity.run_id, count, durations, resumed, pod_start, bool(from_pods))
        except Exception as exc:  # never the task's outcome
            self.log.warning(
                "could not record the shard history of %s (%s); the run is unaffected", event.name, exc
            )
            return
        source = f" ({len(from_pods)} from pod times)" if from_pods else ""
        self.log.info("shard history: recorded %d shard lengths of %s%s", len(durations), event.name, source)

    def _job_pods(
        self, event: KueueEvent, packs: ShardPacks, wanted: IndexSet
    ) -> dict[int, list[dict[str, Any]]]:
        """The event's Job's own pods by index, newest first (one LIST, bound by its uid), when some index
        runs a single wanted shard; else nothing is asked. At most ``MAX_TIMED_PODS``."""
        if not wanted or not any(size == 1 for size, _ in packs.runs):
            return {}
        pods = self._client().hook.pods_of_job_bounded(event.namespace, event.name, MAX_TIMED_PODS)
        return pods_by_index(pods, event.name, event.uid)

    def _main_container(self) -> str | None:
        main = template_main_container(self._template()).get("name")
        return str(main) if main else None
