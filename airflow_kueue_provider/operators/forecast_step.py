"""The forecast at submit (docs/forecast.md): just before the Job is created, from its packs' learned (or
stated) lengths, its ClusterQueue's quota and cohort and the workloads ahead, when it will start and finish.

One line in the task log, the deadline plan's ``forecast`` (so the trigger's first check can escalate a
deadline already out of reach), ``forecast`` in the result, and when the run ends how far off it was. A
forecast that cannot be made (no lengths, the queue unreadable) is left out with one line; it never fails
the task."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from ..hooks.forecast_inputs import (
    QUEUED_WAIT_SECONDS,
    ForecastInputsUnavailable,
    pod_request,
    queued_workload,
    read_priority,
    read_queue_room,
)
from ..hooks.identity_key import IdentityKeyMissing, identity_seal
from ..hooks.kind_client import KindClient
from ..kueue.api_time import parse_api_time
from ..kueue.checkpoints.learned_lengths import LearnedLengths
from ..kueue.checkpoints.shard_packing import ShardPacks, packs_of_job
from ..kueue.errors import KueueProviderError
from ..kueue.identity.identity_seal import IdentitySeal
from ..kueue.index_set import IndexSet
from ..kueue.job_progress import finished_condition
from ..kueue.names import FORECAST_RUN_ANNOTATION, MIN_PARALLELISM_ANNOTATION, QUEUE_NAME_LABEL
from ..kueue.progress.deadline import DeadlinePlan
from ..kueue.progress.forecast import Forecast, JobWork, forecast, job_work
from .job_submission import Submission

FORECAST_KEY = "forecast"
"""The result's key (and the XCom key it crosses the deferral under)."""
MODEL_WAIT_KEY, WAIT_BIAS_KEY = "model_wait_seconds", "wait_bias_seconds"
_XCOM_KEY = "kueue_forecast"


def forecast_record(made: Forecast, made_at: datetime) -> dict[str, Any]:
    """The result's ``forecast``: made_at, start, finish, finish_early, finish_late, nights, basis (and, once
    made again from the queue, ``at_submit``: the first one's made_at, start and finish); made while the Job
    waited for quota, ``model_wait_seconds`` (the model's wait) and ``wait_bias_seconds`` (what the learned
    bias added to it)."""
    record: dict[str, Any] = {
        "made_at": made_at.isoformat(timespec="seconds"),
        "start": made.start.at.isoformat(timespec="seconds"),
        "finish": made.finish.at.isoformat(timespec="seconds"),
        "finish_early": made.finish_early.isoformat(timespec="seconds"),
        "finish_late": made.finish_late.isoformat(timespec="seconds"),
        "nights": made.nights,
        "basis": made.basis,
    }
    if made.model_wait is not None:
        record[MODEL_WAIT_KEY] = round(made.model_wait, 1)
        record[WAIT_BIAS_KEY] = round(made.wait_bias, 1)
    return record


def model_error(record: dict[str, Any]) -> float | None:
    """How much later than the model (without the learned bias) the run finished, in seconds: what the next
    nights learn (``ShardHistory.merge_wait_error``); None for a record made once the Job was admitted (its
    wait was a fact) or without an outcome."""
    error, bias = record.get("error_seconds"), record.get(WAIT_BIAS_KEY)
    if MODEL_WAIT_KEY not in record or not isinstance(error, (int, float)) or isinstance(error, bool):
        return None
    applied = float(bias) if isinstance(bias, (int, float)) and not isinstance(bias, bool) else 0.0
    return round(float(error) + applied, 1)


def with_outcome(record: dict[str, Any], actual: datetime) -> tuple[dict[str, Any], str]:
    """The record with ``actual_finish`` and ``error_seconds`` (actual - forecast, signed), and the line
    that says it: ``forecast was 12 s early (2 %)`` (of the time from the forecast to the finish)."""
    error, line = _off_by(record, actual)
    outcome = {**record, "actual_finish": actual.isoformat(timespec="seconds"), "error_seconds": error}
    first = record.get("at_submit")
    if isinstance(first, dict) and "finish" in first and "made_at" in first:
        first_error, first_line = _off_by(first, actual)
        outcome["at_submit"] = {**first, "error_seconds": first_error}
        line += f"; at submit it {first_line.removeprefix('forecast ')}"
    return outcome, line


def _off_by(record: dict[str, Any], actual: datetime) -> tuple[float, str]:
    forecast_at = datetime.fromisoformat(record["finish"])
    error = (actual - forecast_at).total_seconds()
    took = max((actual - datetime.fromisoformat(record["made_at"])).total_seconds(), 1.0)
    word = "early" if error > 0 else "late" if error < 0 else "on time"
    line = f"forecast was {abs(error):.0f} s {word} ({abs(error) / took:.0%} of {took:.0f} s)"
    return round(error, 1), line


class ForecastStep:
    """Mixed into ``KueueOperator``: the forecast before the create, in the plan and the result."""

    _forecast: dict[str, Any] | None = None
    _forecast_made: Forecast | None = None
    _forecast_inputs: tuple[JobWork, int | None, str] | None = None
    """What the forecast was made from (the work, the priority, the LocalQueue): made again once queued."""
    _local_queues: Mapping[str, Mapping[str, Any]] = MappingProxyType({})
    """The LocalQueues the task read at entry, by name (``execute`` sets them): the forecast reuses them."""
    if TYPE_CHECKING:
        log: Any
        task_id: str
        queue_name: str

        def resolved_namespace(self) -> str: ...

        def _shard_count(self) -> int: ...

        def _client(self) -> KindClient: ...

    def _before_create(self, client: KindClient, manifest: dict[str, Any]) -> None:
        """The kind's checks, then the forecast of the shaped Job (its packs, parallelism, pod requests)
        into its queue as it is now, just before it is created."""
        super()._before_create(client, manifest)  # type: ignore[misc]
        self._forecast, self._forecast_made, self._forecast_inputs = None, None, None
        spec = manifest.get("spec") or {}
        pod_spec = (spec.get("template") or {}).get("spec")
        if not pod_spec:
            return  # no one pod template (a JobSet's replicated Jobs): not forecast yet
        completions = int(spec.get("completions") or 1)
        packs = packs_of_job(manifest) or ShardPacks(
            IndexSet.range(0, completions)
        )  # unpacked: shard = index
        stated = getattr(self, "expected_shard_duration", None)
        pair = (float(stated.shortest), float(stated.longest)) if stated is not None else None
        work = job_work(
            packs,
            int(spec.get("parallelism") or packs.index_count),
            pod_request(pod_spec),
            self._learned_for_forecast(self._shard_count()),
            pair,
        )
        if work is None:
            return  # nothing says how long a shard runs: no forecast, and nothing to say
        least = str(
            ((manifest.get("metadata") or {}).get("annotations") or {}).get(MIN_PARALLELISM_ANNOTATION, "")
        )
        work = dataclasses.replace(work, least_pods=int(least) if least.isdigit() else None)
        now = datetime.now(UTC)
        priority, unknown = self._forecast_priority(client, manifest)
        seal = _seal()
        queue = _queue_of(manifest) or self.queue_name  # a spill Job's is its spill queue
        try:
            room = read_queue_room(
                client.hook,
                self.resolved_namespace(),
                queue,
                priority,
                now,
                seal,
                queue=self._local_queues.get(queue),
            )
        except (ForecastInputsUnavailable, ApiException, KueueProviderError) as exc:
            self.log.warning("forecast: left out (%s)", exc)
            return
        if unknown:  # said only when there is a forecast: one warning line at most
            self.log.warning("forecast: priority unknown (%s); every pending workload counted ahead", unknown)
        made = forecast(work, room, now)
        if made is None:
            self.log.warning("forecast: left out (no flavor of the ClusterQueue holds one pod)")
            return
        self.log.info("%s", made.line())
        self._forecast, self._forecast_made = forecast_record(made, now), made
        self._forecast_inputs = (work, priority, queue)
        if seal is not None:  # what the next tasks' forecasts read of this Job (sealed: they trust no other)
            _annotate_run(manifest, seal, (made.finish.at - made.start.at).total_seconds())

    def _forecast_once_queued(self, client: KindClient, job: dict[str, Any]) -> None:
        """The forecast again once the created Job's Workload is in Kueue's queue: its place there is then
        exact (Jobs created in the same second as this one, a mapped task's instances, exist by then and
        stand before or after it). Replaces the first one for the deadline and the result, which keep the
        first as ``at_submit``; nothing changes when no Workload is made within ``QUEUED_WAIT_SECONDS`` or
        the queue cannot be read."""
        if self._forecast_inputs is None or self._forecast is None:
            return
        work, priority, queue = self._forecast_inputs
        uid = str((job.get("metadata") or {}).get("uid") or "")
        own = queued_workload(client.hook, self.resolved_namespace(), uid) if uid else None
        if own is None:
            self.log.info("forecast: not made again (no Workload in %.0f s)", QUEUED_WAIT_SECONDS)
            return
        now = datetime.now(UTC)
        try:
            room = read_queue_room(
                client.hook,
                self.resolved_namespace(),
                queue,
                priority,
                now,
                _seal(),
                own,
                queue=self._local_queues.get(queue),
            )
        except (ForecastInputsUnavailable, ApiException, KueueProviderError) as exc:
            self.log.warning("forecast: not made again (%s)", exc)
            return
        made = forecast(work, room, now)
        if made is None:
            return
        first = {k: self._forecast[k] for k in ("made_at", "start", "finish")}
        self.log.info("%s", made.line().replace("forecast:", "forecast once queued:", 1))
        self._forecast, self._forecast_made = {**forecast_record(made, now), "at_submit": first}, made

    @staticmethod
    def _forecast_priority(client: KindClient, manifest: dict[str, Any]) -> tuple[int | None, str]:
        """The Job's Workload priority (its WorkloadPriorityClass's value, 0 without one), or None and why it
        is unknown: the queue ahead is then every pending workload."""
        try:
            return read_priority(client.hook, manifest), ""
        except (ForecastInputsUnavailable, ApiException, KueueProviderError, HTTPError, OSError) as exc:
            return None, str(exc)

    def _learned_for_forecast(self, shard_count: int) -> LearnedLengths | None:
        """The operator's learned lengths (shard history) for this shard count, if it has any."""
        learned = getattr(self, "_learned_lengths", None)
        if learned is None:
            return None
        try:
            value = learned(shard_count)
        except (KueueProviderError, ApiException, OSError) as exc:
            self.log.warning("forecast: shard history unread (%s); from the stated duration", exc)
            return None
        return value if isinstance(value, LearnedLengths) and value.fits(shard_count) else None

    def _with_forecast(
        self, context: Any, plan: DeadlinePlan | None, client: KindClient, submission: Submission
    ) -> DeadlinePlan | None:
        """The plan with the forecast's finish (the verdict's estimate until the run has one), made again
        from the queue for a Job this try created; the record kept for the result across the deferral (an
        XCom of this task instance)."""
        if not submission.reattached:
            self._forecast_once_queued(client, submission.job)
        if self._forecast is None or self._forecast_made is None:
            return plan
        try:
            context["ti"].xcom_push(key=_XCOM_KEY, value=self._forecast)
        except Exception as exc:  # an XCom backend's own errors: the record, never the run
            self.log.warning("forecast: not kept for the result (%s)", exc)
        if plan is None:
            return None
        return dataclasses.replace(plan, forecast=self._forecast_made.finish)

    def _forecast_outcome(
        self, context: Any, result: dict[str, Any], message: str, status: str = ""
    ) -> tuple[dict[str, Any], str]:
        """The final event's (result, message), the result with ``forecast`` and how far off it was; a run
        that succeeded (``status``) teaches the shard history how far off the model was (``model_error``)."""
        record = self._forecast if self._forecast is not None else _pulled(context, self.task_id)
        if record is None:
            return result, message
        try:
            record, line = with_outcome(record, self._ended_at(result))
        except (KeyError, ValueError, TypeError) as exc:
            self.log.warning("forecast: the record is unreadable (%s)", exc)
            return result, message
        self.log.info("%s", line)
        if status == "success" and (error := model_error(record)) is not None:
            self._learn_wait_error(error)
        return {**result, FORECAST_KEY: record}, message

    def _learn_wait_error(self, seconds: float) -> None:
        """Keep how far off the model was for the next nights: a kind with a shard history overrides this
        (``ShardHistoryStep``); one without keeps nothing."""

    def _ended_at(self, result: dict[str, Any]) -> datetime:
        """When the Job ended (its finished condition), not when the worker resumed: a busy scheduler can take
        minutes to hand the task back. Read from the result (``finished_at``), else from the Job (an event
        of an earlier version, another kind); now when the Job cannot be read."""
        if ended := parse_api_time(result.get("finished_at")):
            return ended
        name, namespace = result.get("job_name"), result.get("namespace")
        job = None
        if name and namespace:
            try:
                job = self._client().get(str(namespace), str(name))
            except (ApiException, KueueProviderError, HTTPError, OSError) as exc:
                self.log.warning("forecast: the Job's end unread (%s); measured to now", exc)
        condition = finished_condition(job) if job is not None else None
        ended = parse_api_time((condition or {}).get("lastTransitionTime"))
        return ended or datetime.now(UTC)


def _pulled(context: Any, task_id: str) -> dict[str, Any] | None:
    """The record ``_with_forecast`` kept (None: no forecast was made, or it could not be read)."""
    ti = context.get("ti") if hasattr(context, "get") else None
    if ti is None:
        return None
    try:
        value = ti.xcom_pull(task_ids=task_id, key=_XCOM_KEY, map_indexes=getattr(ti, "map_index", -1))
    except Exception:  # an XCom backend's own errors: no outcome, never a failed task
        return None
    return value if isinstance(value, dict) and "finish" in value else None


def _queue_of(manifest: Mapping[str, Any]) -> str:
    """The LocalQueue the object is created in (its queue-name label)."""
    return str(((manifest.get("metadata") or {}).get("labels") or {}).get(QUEUE_NAME_LABEL) or "")


def _seal() -> IdentitySeal | None:
    """The identity seal, or None without a configured key (the forecast run is then neither written nor
    read: unsealed, another task would not trust it)."""
    try:
        return identity_seal()
    except IdentityKeyMissing:
        return None


def _annotate_run(manifest: dict[str, Any], seal: IdentitySeal, seconds: float) -> None:
    """The Job's pod template carries its forecast run (``FORECAST_RUN_ANNOTATION``), sealed for its name."""
    metadata = manifest.get("metadata") or {}
    template = manifest.setdefault("spec", {}).setdefault("template", {})
    annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
    value = seal.forecast_run(str(metadata.get("namespace")), str(metadata.get("name")), round(seconds))
    annotations[FORECAST_RUN_ANNOTATION] = value
