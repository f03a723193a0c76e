"""A job kind's part of the trigger (docs/design.md, "Job kinds"): what ``KueueFollowTrigger``'s loop asks
of the kind, on the model of Kueue's ``jobframework.GenericJob``, and the optional capabilities a kind may
have (no-ops here: a null object for each, never an "if the kind has ..." in the loop).

What every kind does the same way is not here but in the loop, read through the kind's description
(``kueue.kinds``): following it on the shared watch, reading it fresh, deleting it unless finished."""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any, ClassVar, Generic, TypeVar

from ..kueue.job_progress import Outcome
from ..kueue.kinds import KindDescription
from ..kueue.progress.followed_view import FollowedView
from ..kueue.progress.quota_guard import Unmanaged
from ..watch.following import Following
from ..watch.snapshots import KindSnapshot

V = TypeVar("V", bound=FollowedView)


class FollowedKind(ABC, Generic[V]):
    """What a kind (``KueueJobTrigger``, ``KueueJobSetTrigger``) gives the shared loop; ``V`` is its view."""

    description: ClassVar[KindDescription]

    @property
    def kind(self) -> str:
        return self.description.kind

    @abstractmethod
    def _kind_kwargs(self) -> dict[str, Any]:
        """The kind's own serialized kwargs: its name and uid keys, and its capabilities' state."""

    @abstractmethod
    def _view(self, snapshot: KindSnapshot) -> V:
        """The snapshot's object (present: the loop checked) as the kind's view."""

    @abstractmethod
    def _outcome(self, view: V) -> Outcome | None: ...

    @abstractmethod
    def _unmanaged(self, view: V, seconds_since_submit: float) -> Unmanaged | None: ...

    @abstractmethod
    def _line(self, view: V, position: tuple[int, int] | None, waited: float | None) -> str: ...

    @abstractmethod
    def _start_overdue(self, view: V, since_admission: float) -> bool | None:
        """None: nothing left to look at (every pod started, or it finished); else whether it is overdue."""

    @abstractmethod
    async def _stuck_reason(self, following: Following, view: V) -> str | None: ...

    @abstractmethod
    def _payload(self, view: V, obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        """(the kind's result keys, with ``self._released`` closed; each child Job's failed indexes for the
        log tails)."""

    # --- optional capabilities (no-ops unless the kind has them) -----------------------------------------
    def _capabilities(self) -> AbstractAsyncContextManager[None]:
        """Open what the capabilities need while the object is followed (a ledger writer)."""
        return nullcontext()

    async def _step(self, following: Following, obj: dict[str, Any], view: V) -> float | None:
        """A change the kind makes while the object runs (a ramp step); seconds until the next one."""
        return None
