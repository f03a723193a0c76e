"""The bed's model of the worker SDK's hand-off of a stopped pack's rest (``worker/pack_handoff``): pure
bookkeeping on one clock (``time.monotonic`` in ``DoneRecords``), no I/O.

What it models, per Job (a shard container and prefix):

- A pod told to stop releases the shards of its run it had not finished (the one in progress included).
  Each released shard, in run order, goes to the owner index's next pod when that pod waits for it (running:
  it claims and runs it after its work; Pending: it runs it in its pack's order), else to the running pod of
  the Job whose work ends first (list scheduling: the first pod to run out of work takes the next shard),
  which runs it after its work plus ``TAKE_OVER_SECONDS`` of Blob requests. No running pod: the shard stays
  unclaimed and the owner index's next pod runs it, as without the hand-off.
- A shard is claimed by its taker from when the taker starts it. The owner index's next pod, when first seen,
  waits for the shards of its pack another pod has started; those still queued behind another pod's work go,
  in order, to whoever is free first, itself or a running pod of the Job; its run ends no earlier than the
  shards it waits for.
- A pod that succeeds: its run's shards get their records (a shard it took over and, by the clock, had no
  time for is released again: its patch landed after KWOK ended it). A pod that ends without a word (its node
  lost) releases nothing; the shards it took over and finished keep their records, the others go to their
  owner index's waiting pod, if any.

Where the bed differs from the SDK: the shard in progress at a stop is run again whole (its checkpoint is
not modelled); released shards are handed out when the stop is seen, to the pods running then (a pod that
starts later takes none; the SDK's would take any still unclaimed when it runs out of work); the owner
index's next pod decides what it runs and waits for when it is first seen (Pending), the SDK's as it reaches
each shard; a waiting pod that takes a shard of its own pack back is offered other packs' shards again while
it runs it (the SDK's takes none once it waits); a claim lost with its pod goes to the owner's pod at once,
not after the SDK's lease (``LEASE_SECONDS``).

A pod evicted by the night (``PodEvictions``) is stopped in these books just before the eviction, and when
``grace_end`` says its released shards are finished by the pods that took them over within its grace, KWOK is
told to end it Succeeded then (``done_records``: the SDK's ``finished_elsewhere``); its index gets no next
pod. A pod stopped otherwise (its node lost, preempted) fails at once, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Shard = tuple[int, float]  # (shard id, seconds)
Key = tuple[str, str]  # a Job's place: (container, prefix)

TAKE_OVER_SECONDS = 0.05
"""What a take-over costs a pod in Blob requests: a list of the release records and the claim's write."""
BUSY_MARGIN_SECONDS = 1.0
"""A pod whose work ends sooner takes no released shard: it is on its way out (a patch could land after)."""
LATE_SECONDS = 2.0
"""A pod that succeeds this long before a shard it took over ends did not run it (its patch landed late)."""
PATCH_TOLERANCE_SECONDS = 0.2
"""A pod's end moved by more than this is patched (``run-remaining``)."""
UNCLAIMED_SECONDS = 5.0
"""The SDK's ``pack_handoff.UNCLAIMED_SECONDS``: a stopped pod none of whose released shards is claimed by
then stops waiting for them (``grace_end``)."""
GRACE_POLL_SECONDS = 0.5
"""The SDK's ``pack_handoff.GRACE_POLL_SECONDS``: a waiting pod sees its rest done half a poll late."""


@dataclass
class Claim:
    uid: str  # the pod that runs the shard
    start: float
    end: float
    handed_off: bool  # taken over by another index's pod (not the owner index's next pod)


@dataclass
class PodPlan:
    """One live pod (seen, not ended): what it runs and when, what it waits for, and what KWOK was told."""

    key: Key
    index: int
    run: list[Shard]  # its pack's shards without a record, then the shards it takes over, in order
    waits: set[int] = field(default_factory=set)  # shards of its pack another pod runs
    times: dict[int, tuple[float, float]] = field(default_factory=dict)  # once Running: (start, end)
    running_at: float | None = None
    work_end: float = 0.0  # once Running: when its run's last shard ends
    told_remaining: float = 0.0  # Pending: the length KWOK counts from Running
    kwok_end: float = 0.0  # Running: when KWOK ends it


class PackHandOff:
    """The live pods, the claims of shards taken over, and which pod waits for which shard."""

    def __init__(self) -> None:
        self.plans: dict[str, PodPlan] = {}  # pod uid -> its plan, while it lives
        self._by_key: dict[Key, set[str]] = {}
        self._claims: dict[tuple[Key, int], Claim] = {}
        self._waiter: dict[tuple[Key, int], str] = {}  # (key, shard) -> the owner index's pod waiting for it
        self.handed_off = 0  # shards taken over by another running pod of their Job

    # -- the pods' events; each returns the uids of the pods whose end may have moved --

    def seen(
        self, uid: str, key: Key, index: int, ran: list[Shard], done: set[int], now: float
    ) -> tuple[PodPlan, set[str]]:
        """A new pod of pack ``ran``: it runs the shards without a record no live pod has started."""
        rest: list[Shard] = []
        waits: set[int] = set()
        moved = {uid}
        queued: list[Shard] = []
        for shard, seconds in ran:
            if shard in done:
                continue
            claim = self._claims.get((key, shard))
            if claim is not None and claim.start <= now:
                waits.add(shard)
                continue
            if claim is not None:  # queued behind another pod's work: not started, so nobody holds it
                moved.add(claim.uid)
                self._take_back(key, shard)
                queued.append((shard, seconds))
                continue
            rest.append((shard, seconds))
        plan = PodPlan(key, index, rest, waits, told_remaining=sum(s for _, s in ran))
        self.plans[uid] = plan
        self._by_key.setdefault(key, set()).add(uid)
        # The not-started ones go, in order, to whoever is free first: this pod (as it reaches them) or a
        # running pod of the Job that runs out of work sooner (as it takes released shards over).
        free_at = now + sum(seconds for _, seconds in rest)
        for shard, seconds in queued:
            peer = self._first_free(key, now)
            if peer is not None and self.plans[peer].work_end + TAKE_OVER_SECONDS < free_at:
                self._give(peer, shard, seconds, now, handed_off=True)
                self.handed_off += 1
                moved.add(peer)
                waits.add(shard)
            else:
                rest.append((shard, seconds))
                free_at += seconds
        for shard in waits:
            self._waiter[(key, shard)] = uid
        return plan, moved

    def running(self, uid: str, now: float) -> set[str]:
        plan = self.plans.get(uid)
        if plan is None or plan.running_at is not None:
            return set()
        plan.running_at = at = now
        for shard, seconds in plan.run:
            plan.times[shard] = (at, at + seconds)
            at += seconds
        plan.work_end, plan.kwok_end = at, now + plan.told_remaining
        return {uid}

    def stopping(self, uid: str, running_for: float, now: float) -> tuple[list[Shard], set[str]] | None:
        """A pod told to stop: the shards it finished (None: not a live pod), and its rest released."""
        plan = self.plans.get(uid)
        if plan is None:
            return None
        if plan.running_at is None:  # not seen Running (a test's pod): Running since ``running_for``
            self.running(uid, now - running_for)
        stop_at = (now if plan.running_at is None else plan.running_at) + running_for
        finished = [(s, sec) for s, sec in plan.run if s in plan.times and plan.times[s][1] <= stop_at]
        rest = [(s, sec) for s, sec in plan.run if (s, sec) not in finished]
        self._forget(uid)
        return finished, self._release(plan.key, rest, now)

    def succeeded(self, uid: str, now: float) -> tuple[list[Shard], list[Shard], set[str]] | None:
        """A pod that ran to the end: (the shards it ran, the shards it took over and had no time for, which
        are released again, the moved pods); None: not a live pod."""
        plan = self.plans.get(uid)
        if plan is None:
            return None
        late = [(s, sec) for s, sec in plan.run if self._holds(uid, plan.key, s, after=now + LATE_SECONDS)]
        self._forget(uid)
        ran = [item for item in plan.run if item not in late]
        return ran, late, self._release(plan.key, late, now)

    def ended(self, uid: str, now: float) -> tuple[list[Shard], set[str]]:
        """A pod that ended without a word (neither told to stop nor succeeded while seen): the shards it
        took over and finished (their records were written at their ends); the others go to their owner's
        waiting pod, with no release record for the Job's other pods."""
        plan = self.plans.get(uid)
        if plan is None:
            return [], set()
        taken = [(s, sec) for s, sec in plan.run if self._holds(uid, plan.key, s)]
        finished = [(s, sec) for s, sec in taken if plan.times[s][1] <= now]
        self._forget(uid)
        rest = [item for item in taken if item not in finished]
        return finished, self._release(plan.key, rest, now, to_peers=False)

    def grace_end(self, key: Key, rest: list[int], done: set[int], now: float) -> float | None:
        """When a stopped pod waiting in its grace sees every shard of its released ``rest`` done by the pods
        that took it over (``done``: shards with a record), or None: one is not claimed, or none is started
        within ``UNCLAIMED_SECONDS`` (the SDK then exits 143 and its index gets a next pod)."""
        claims = []
        for shard in rest:
            if shard in done:
                continue
            claim = self._claims.get((key, shard))
            if claim is None or claim.uid not in self.plans:
                return None
            claims.append(claim)
        if not claims:
            return now
        if min(claim.start for claim in claims) > now + UNCLAIMED_SECONDS:
            return None
        return max(claim.end for claim in claims) + GRACE_POLL_SECONDS / 2

    # -- patches --

    def to_patch(self, uids: set[str], now: float, force: frozenset[str] = frozenset()) -> list[str]:
        """The pods of ``uids`` whose end KWOK keeps moved past the tolerance (and ``force``), oldest first;
        each is marked told (its patch is computed when it is sent, from ``remaining``)."""
        out = []
        for uid in sorted(uids | force):
            plan = self.plans.get(uid)
            if plan is None:
                continue
            if plan.running_at is None:
                told, want = plan.told_remaining, self._pending_remaining(plan, now)
            else:
                told, want = plan.kwok_end, self._end(plan)
            if uid in force or abs(want - told) > PATCH_TOLERANCE_SECONDS:
                out.append(uid)
                self.remaining(uid, now)
        return out

    def remaining(self, uid: str, now: float) -> float | None:
        """The ``run-remaining`` (seconds) a patch sent now carries, or None for a pod no longer live."""
        plan = self.plans.get(uid)
        if plan is None:
            return None
        if plan.running_at is None:
            plan.told_remaining = self._pending_remaining(plan, now)
            return plan.told_remaining
        plan.kwok_end = self._end(plan)
        return max(0.0, plan.kwok_end - now)

    # -- inside --

    def _end(self, plan: PodPlan) -> float:
        """A running pod's end: its work's, or the last end of the shards it waits for."""
        waited = [c.end for s in plan.waits if (c := self._claims.get((plan.key, s))) is not None]
        return max([plan.work_end, *waited])

    def _pending_remaining(self, plan: PodPlan, now: float) -> float:
        waited = [c.end - now for s in plan.waits if (c := self._claims.get((plan.key, s))) is not None]
        return max([sum(s for _, s in plan.run), *waited])

    def _holds(self, uid: str, key: Key, shard: int, after: float | None = None) -> bool:
        claim = self._claims.get((key, shard))
        return claim is not None and claim.uid == uid and (after is None or claim.end > after)

    def _forget(self, uid: str) -> None:
        plan = self.plans.pop(uid)
        self._by_key.get(plan.key, set()).discard(uid)
        for shard, _ in plan.run:
            if self._holds(uid, plan.key, shard):
                del self._claims[(plan.key, shard)]
        for shard in plan.waits:
            if self._waiter.get((plan.key, shard)) == uid:
                del self._waiter[(plan.key, shard)]

    def _release(self, key: Key, shards: list[Shard], now: float, to_peers: bool = True) -> set[str]:
        moved: set[str] = set()
        for shard, seconds in shards:
            self._claims.pop((key, shard), None)
            owner = self._waiter.pop((key, shard), None)
            if owner is not None and owner in self.plans:
                self.plans[owner].waits.discard(shard)
                self._give(owner, shard, seconds, now, handed_off=False)
                moved.add(owner)
                continue
            peer = self._first_free(key, now) if to_peers else None
            if peer is not None:  # else unclaimed: the owner index's next pod runs it
                self._give(peer, shard, seconds, now, handed_off=True)
                self.handed_off += 1
                moved.add(peer)
        return moved

    def _first_free(self, key: Key, now: float) -> str | None:
        """The running pod of the Job whose work ends first, of those KWOK does not end within
        ``BUSY_MARGIN_SECONDS`` (a pod told to run longer, whose queued take-overs went back, still lives)."""
        free = [
            (plan.work_end, uid)
            for uid in self._by_key.get(key, set())
            if (plan := self.plans[uid]).running_at is not None
            and max(plan.work_end, plan.kwok_end) > now + BUSY_MARGIN_SECONDS
        ]
        return min(free)[1] if free else None

    def _give(self, uid: str, shard: int, seconds: float, now: float, handed_off: bool) -> None:
        """``shard`` joins the pod's run: after its work when Running (a claim), in its run when Pending."""
        plan = self.plans[uid]
        plan.run.append((shard, seconds))
        if plan.running_at is None:
            return
        start = max(plan.work_end, now) + TAKE_OVER_SECONDS
        plan.times[shard] = (start, start + seconds)
        plan.work_end = start + seconds
        self._claims[(plan.key, shard)] = Claim(uid, start, start + seconds, handed_off)

    def _take_back(self, key: Key, shard: int) -> None:
        """A shard queued behind a pod's work, run by its owner's new pod instead (it never took it over):
        the pod's later take-overs move up."""
        claim = self._claims.pop((key, shard))
        self.handed_off -= claim.handed_off
        plan = self.plans[claim.uid]
        plan.run[:] = [item for item in plan.run if item[0] != shard]
        del plan.times[shard]
        shift = claim.end - claim.start + TAKE_OVER_SECONDS
        for later in plan.run:
            other = self._claims.get((key, later[0]))
            if other is not None and other.uid == claim.uid and other.start > claim.start:
                other.start, other.end = other.start - shift, other.end - shift
                plan.times[later[0]] = (other.start, other.end)
        plan.work_end -= shift
