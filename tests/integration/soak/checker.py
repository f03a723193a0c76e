"""The soak's invariants as pure functions over a ``History``: each returns the violations it found, each
with the evidence a reader needs to find it in the logs.

Where a witness was down (a recorder ``Gap``) the state in between is unknown: a check that would need it
reports the case as *unverified*, never as a pass and never as a violation (docs/fault-soak.md lists these
blind spots). API times are whole seconds, so every comparison of times allows ``History.tolerance``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .history import Gap, History, Observation

GONE = ("DELETED", "GONE")


@dataclass(frozen=True)
class Violation:
    check: str
    subject: str
    evidence: str

    def __str__(self) -> str:
        return f"[{self.check}] {self.subject}: {self.evidence}"


@dataclass(frozen=True)
class Segment:
    """A condition's state from ``start`` to ``end``; ``state`` None: unknown (inside a recorder gap)."""

    start: float
    end: float
    state: bool | None


@dataclass
class Findings:
    violations: list[Violation] = field(default_factory=list)
    unverified: list[Violation] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)


def _overlaps(gaps: Iterable[Gap], kind: str, start: float, end: float) -> bool:
    return any(g.kind == kind and g.start < end and g.end > start for g in gaps)


def condition_timeline(
    observations: list[Observation], condition: str, gaps: list[Gap], end: float
) -> list[Segment]:
    """One Workload's ``condition`` over time, from its observations (in arrival order) and each
    condition's lastTransitionTime; a change seen across a gap, or a lastTransitionTime that moved while
    the status did not (a flip and a flip back unseen), makes the span before it unknown."""
    if not observations:
        return []
    cursor = observations[0].view.get("created") or observations[0].t
    state, since, last_seen = False, cursor, cursor
    segments: list[Segment] = []
    for obs in observations:
        if obs.event in GONE:
            end = obs.t
            break
        status, changed_at = obs.view["conditions"].get(condition, [False, None])
        changed_at = changed_at or since
        if status != state or changed_at != since:
            missed = status == state or _overlaps(gaps, obs.kind, last_seen, obs.t)
            segments.append(Segment(cursor, max(cursor, changed_at), None if missed else state))
            cursor = max(cursor, changed_at)
            state, since = bool(status), changed_at
        last_seen = obs.t
    segments.append(Segment(cursor, max(cursor, end), state))
    return segments


def state_near(segments: list[Segment], t: float, tolerance: float) -> bool | None:
    """True if the condition held within ``tolerance`` of ``t``; None if unknown there; else False."""
    states = {s.state for s in segments if s.start - tolerance <= t <= s.end + tolerance}
    if True in states:
        return True
    return None if None in states else False


class Index:
    """Lookups over a History: a Workload's observations, a pod's Job, a Job's task instance."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.by_uid: dict[str, list[Observation]] = defaultdict(list)
        for obs in history.observations:
            self.by_uid[obs.uid].append(obs)
        self.workload_of_job: dict[str, str] = {}
        self.job_uids: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.pod_job_uid: dict[str, str] = {}
        for uid, seen in self.by_uid.items():
            last = seen[-1]
            if last.kind == "Workload" and last.view.get("job_uid"):
                self.workload_of_job[last.view["job_uid"]] = uid
            elif last.kind == "Job":
                self.job_uids[(last.namespace, last.name)].append(uid)
            elif last.kind == "Pod" and last.view.get("job_uid"):
                self.pod_job_uid[uid] = last.view["job_uid"]
        self.pod_names: dict[str, tuple[str, str, str]] = {}  # pod name -> (namespace, job, pod uid)
        for entry in history.journal:
            namespace, _, pod = str(entry.get("pod", "")).partition("/")
            if entry.get("job"):
                self.pod_names.setdefault(pod, (namespace, str(entry["job"]), str(entry.get("uid", ""))))

    def latest(self, uid: str) -> dict[str, Any]:
        live = [o for o in self.by_uid.get(uid, []) if o.event not in GONE]
        return live[-1].view if live else {}

    def job_uid_for_pod(self, pod_uid: str, namespace: str, job_name: str | None, t: float) -> str | None:
        """The pod's Job from its own observations, else the Job of that name that existed at ``t``."""
        if pod_uid in self.pod_job_uid:
            return self.pod_job_uid[pod_uid]
        candidates = [
            u
            for u in self.job_uids.get((namespace, job_name or ""), [])
            if (self.latest(u).get("created") or 0) <= t + self.history.tolerance
        ]
        return max(candidates, key=lambda u: self.latest(u).get("created") or 0) if candidates else None

    def timeline(self, job_uid: str | None, condition: str) -> list[Segment] | None:
        workload = self.workload_of_job.get(job_uid or "")
        if workload is None:
            return None
        return condition_timeline(self.by_uid[workload], condition, self.history.gaps, self.history.end)

    def task_key(self, job_uid: str | None) -> str | None:
        """``dag/task/run/map`` of the Job's task instance (every try)."""
        identity = self.latest(job_uid or "").get("identity") or {}
        if not identity.get("dag_id"):
            return None
        return "/".join(str(identity[k]) for k in ("dag_id", "task_id", "run_id", "map_index"))


def _delete_asked(seen: list[Observation]) -> float | None:
    """When the pod's deletion was asked for: from its deletionTimestamp, or the first look that had it."""
    asked = [o.view["delete_asked"] for o in seen if o.view.get("delete_asked")]
    asked += [o.t for o in seen if o.view.get("deleting") or o.event in GONE]
    return min(asked, default=None)


def _starts(history: History, index: Index) -> tuple[list[tuple[float, str, str, str | None, str]], int]:
    """(t, pod uid, namespace, job name, witness) of every pod creation and container start, the journals'
    and the pods';
    and how many pod-status starts came after the pod's deletion was asked for. A kubelet never starts the
    containers of a pod being deleted; KWOK, restarted, plays a pending pod's stages (Running, then gone)
    even so: no process runs, so those are counted, not checked (the journals witness real starts)."""
    starts = []
    for entry in history.journal:
        if entry.get("event") == "start":
            namespace = str(entry["pod"]).partition("/")[0]
            starts.append((float(entry["t"]), str(entry["uid"]), namespace, entry.get("job"), "journal"))
    after_delete = 0
    for uid, seen in index.by_uid.items():
        if seen[0].kind == "Pod" and seen[0].view.get("created"):  # the Job controller made it then
            job = seen[0].view.get("job_name")
            starts.append((seen[0].view["created"], uid, seen[0].namespace, job, "pod creation"))
        first = min(
            (o.view["started"] for o in seen if o.kind == "Pod" and o.view.get("started")), default=None
        )
        if first is None:
            continue
        asked = _delete_asked(seen)
        if asked is not None and asked < first:
            after_delete += 1
            continue
        starts.append((first, uid, seen[0].namespace, seen[0].view.get("job_name"), "pod status"))
    return starts, after_delete


def started_outside_admission(history: History, index: Index | None = None) -> Findings:
    """Every process start (journal) and container start (pod status) falls while its Workload is
    Admitted."""
    index = index or Index(history)
    found = Findings()
    starts, after_delete = _starts(history, index)
    found.figures["pod_status_starts_after_delete"] = after_delete
    for t, pod_uid, namespace, job, witness in starts:
        job_uid = index.job_uid_for_pod(pod_uid, namespace, job, t)
        segments = index.timeline(job_uid, "Admitted")
        subject = f"pod {namespace}/{pod_uid[:8]} of Job {job} started at {t:.1f} ({witness})"
        state = None if segments is None else state_near(segments, t, history.tolerance)
        if state is False:
            found.violations.append(Violation("started-outside-admission", subject, f"Admitted: {segments}"))
        elif state is None:
            found.unverified.append(Violation("started-outside-admission", subject, "Workload state unknown"))
    return found


def ran_past_quota(history: History, index: Index | None = None) -> Findings:
    """A process ends at the latest its grace period after Kueue released its quota (Kueue releases a
    Job's quota when ``status.active`` is 0, and terminating pods are not active: that tail is a figure)."""
    index = index or Index(history)
    found = Findings()
    started: dict[str, dict[str, Any]] = {}
    tails: list[float] = []
    for entry in history.journal:
        if entry.get("event") == "start":
            started[str(entry["uid"])] = entry
            continue
        if entry.get("event") != "exit" or str(entry.get("uid")) not in started:
            continue
        start = started.pop(str(entry["uid"]))
        namespace, _, _pod = str(start["pod"]).partition("/")
        job_uid = index.job_uid_for_pod(str(start["uid"]), namespace, start.get("job"), float(start["t"]))
        segments = index.timeline(job_uid, "QuotaReserved")
        if segments is None:
            continue
        holding = [
            s for s in segments if s.state and s.start - history.tolerance <= float(start["t"]) <= s.end
        ]
        if not holding:
            continue
        released = holding[0].end
        tail = max(0.0, float(entry["t"]) - released)
        tails.append(tail)
        grace = float(index.latest(str(start["uid"])).get("grace", 30))
        if tail > grace + history.tolerance:
            found.violations.append(
                Violation(
                    "ran-past-quota",
                    f"process of pod {start['pod']}",
                    f"exited {tail:.1f}s after its quota was released at {released:.1f} (grace {grace:.0f}s)",
                )
            )
    found.figures = {"quota_tail_max_s": max(tails, default=0.0), "quota_tails": len([t for t in tails if t])}
    found.figures["processes_without_exit"] = len(started)
    return found


def usage_over_limit(history: History) -> Findings:
    """Per ClusterQueue, the quota its reserved, unfinished Workloads hold never exceeds nominal +
    borrowing limit, replayed in the order the watch delivered them (a relist is applied as one step)."""
    found = Findings()
    current: dict[str, dict[str, Any]] = {}
    peak: dict[str, float] = defaultdict(float)
    workloads = [o for o in history.observations if o.kind == "Workload"]
    step: list[Observation] = []

    def check(at: float) -> None:
        usage: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        holders: dict[str, list[str]] = defaultdict(list)
        for uid, view in current.items():
            conditions, cq = view["conditions"], view.get("cluster_queue")
            if (
                cq
                and conditions.get("QuotaReserved", [False])[0]
                and not conditions.get("Finished", [False])[0]
            ):
                holders[cq].append(uid[:8])
                for resource, amount in view["usage"].items():
                    usage[cq][resource] += amount
        for cq, used in usage.items():
            for resource, amount in used.items():
                peak[f"{cq}/{resource}"] = max(peak[f"{cq}/{resource}"], amount)
                limit = history.limits.get(cq, {}).get(resource)
                if limit is not None and amount > limit + 1e-6:
                    found.violations.append(
                        Violation(
                            "usage-over-limit",
                            f"ClusterQueue {cq} at {at:.1f}",
                            f"{resource} {amount:g} > limit {limit:g}; held by {holders[cq]}",
                        )
                    )

    def apply(obs: Observation) -> None:
        if obs.event in GONE:
            current.pop(obs.uid, None)
        else:
            current[obs.uid] = obs.view

    for position, obs in enumerate(workloads):
        if obs.batch:
            step.append(obs)
            if position + 1 < len(workloads) and workloads[position + 1].batch == obs.batch:
                continue
            for member in step:
                apply(member)
            step = []
        else:
            apply(obs)
        check(obs.t)
    found.figures = {"peak_usage": dict(peak)}
    return found


def duplicate_jobs(history: History, index: Index | None = None) -> Findings:
    """One sealed Job per task instance try."""
    index = index or Index(history)
    found = Findings()
    per_try: dict[tuple[Any, ...], list[str]] = defaultdict(list)
    for uid, seen in index.by_uid.items():
        if seen[0].kind != "Job":
            continue
        view = next((o.view for o in seen if o.event not in GONE), seen[0].view)
        identity = view["identity"]
        if view["sealed"] and identity.get("dag_id"):
            key = tuple(identity[k] for k in ("dag_id", "task_id", "run_id", "map_index", "try_number"))
            per_try[key].append(f"{seen[0].name} ({uid[:8]}, created {view.get('created')})")
    for key, jobs in per_try.items():
        if len(jobs) > 1:
            found.violations.append(Violation("duplicate-job", "/".join(map(str, key)), "; ".join(jobs)))
    found.figures = {"sealed_jobs": sum(len(j) for j in per_try.values())}
    return found


def _items_by_task(history: History, index: Index) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """(task key, shard) -> its items log lines, through the pod's Job."""
    found: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for line in history.items:
        namespace, job, pod_uid = index.pod_names.get(line["pod"], ("", "", ""))
        key = index.task_key(index.job_uid_for_pod(pod_uid, namespace, job, float(line["t"])))
        found[(key or f"unknown pod {line['pod']}", int(line["shard"]))].append(line)
    return found


def _task_of(key: str) -> str:
    return "/".join(key.split("/")[:2])  # dag_id/task_id (run ids hold no "/")


def shards_finished_twice(history: History, index: Index | None = None) -> Findings:
    """No shard is run to its last item by two pods that both exited 0."""
    index = index or Index(history)
    found = Findings()
    clean_exit = {
        str(e["pod"]).partition("/")[2]
        for e in history.journal
        if e.get("event") == "exit" and e.get("exit_code") == 0
    }
    redone = 0
    for (key, shard), lines in _items_by_task(history, index).items():
        last = history.items_per_shard.get(_task_of(key))
        if last is None:
            continue
        redone += len(lines) - len({line["item"] for line in lines})
        finishers = sorted({line["pod"] for line in lines if line["item"] == last - 1} & clean_exit)
        if len(finishers) > 1:
            found.violations.append(
                Violation("shard-finished-twice", f"{key} shard {shard}", f"finished by {finishers}")
            )
    found.figures = {"items_logged": len(history.items), "items_redone": redone}
    return found


def _successes(history: History) -> Iterable[tuple[str, Any]]:
    for task in history.tasks:
        if task.state == "success" and task.result and "completions" in task.result:
            yield f"{task.dag_id}/{task.task_id}/{task.run_id}/{task.map_index}", task


def items_lost(history: History, index: Index | None = None) -> Findings:
    """Every item of every shard of a successful task is in the items log, and each shard's done marker
    holds the output those items give."""
    index = index or Index(history)
    found = Findings()
    logged = _items_by_task(history, index)
    prefixes: dict[str, set[str]] = defaultdict(set)
    for uid in index.by_uid:
        view = index.latest(uid)
        if view.get("checkpoint_prefix") and (key := index.task_key(uid)):
            prefixes[key].add(view["checkpoint_prefix"])
    for key, task in _successes(history):
        items = history.items_per_shard.get(_task_of(key))
        if items is None:
            continue
        for shard in range(int(task.result["completions"])):
            seen = {line["item"] for line in logged.get((key, shard), [])}
            if missing := sorted(set(range(items)) - seen):
                found.violations.append(
                    Violation("item-lost", f"{key} shard {shard}", f"items not in the log: {missing[:20]}")
                )
            markers = [history.done[f"{p}/{shard}"] for p in prefixes[key] if f"{p}/{shard}" in history.done]
            expected = history.expected_output.get(f"{_task_of(key)}/{shard}")
            if not markers:
                found.violations.append(Violation("item-lost", f"{key} shard {shard}", "no done marker"))
            elif expected and not _same_output(markers[0], expected):
                found.violations.append(
                    Violation("item-lost", f"{key} shard {shard}", f"output {markers[0]} != {expected}")
                )
    return found


def _same_output(got: dict[str, Any], expected: dict[str, Any]) -> bool:
    for key, value in expected.items():
        if isinstance(value, float):
            if abs(float(got.get(key, float("nan"))) - value) > 1e-9 * max(1.0, abs(value)):
                return False
        elif got.get(key) != value:
            return False
    return True


def unexpected_states(history: History) -> Findings:
    """Every task instance ended in the state expected of its task."""
    found = Findings()
    for task in history.tasks:
        expected = history.expected_states.get(f"{task.dag_id}/{task.task_id}")
        if expected is not None and task.state != expected:
            found.violations.append(
                Violation(
                    "unexpected-state",
                    f"{task.dag_id}/{task.task_id}/{task.run_id}/{task.map_index}",
                    f"{task.state} after {task.try_number} tries, expected {expected}",
                )
            )
    return found


def false_successes(history: History) -> Findings:
    """A successful Kueue task reports every shard done and none failed."""
    found = Findings()
    for key, task in _successes(history):
        result = task.result
        if result["succeeded"] != result["completions"] or result.get("failed_indexes"):
            found.violations.append(
                Violation(
                    "false-success",
                    key,
                    f"succeeded {result['succeeded']}/{result['completions']}, "
                    f"failed indexes {result.get('failed_indexes')!r}",
                )
            )
    return found


CHECKS: dict[str, Callable[[History], Findings]] = {
    "started_outside_admission": started_outside_admission,
    "ran_past_quota": ran_past_quota,
    "usage_over_limit": usage_over_limit,
    "duplicate_jobs": duplicate_jobs,
    "shards_finished_twice": shards_finished_twice,
    "items_lost": items_lost,
    "unexpected_states": unexpected_states,
    "false_successes": false_successes,
}


def check_all(history: History) -> Findings:
    """Every check; figures keyed by check, plus the recorder's gaps."""
    total = Findings()
    for check in CHECKS.values():
        found = check(history)
        total.violations += found.violations
        total.unverified += found.unverified
        total.figures.update(found.figures)
    total.figures["recorder_gaps"] = len(history.gaps)
    total.figures["recorder_gap_seconds"] = round(sum(g.end - g.start for g in history.gaps), 1)
    return total
