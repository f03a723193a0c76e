"""A job kind's part of the trigger (docs/design.md, "Job kinds"): what ``KueueFollowTrigger``'s loop asks
of the kind, on the model of Kueue's ``jobframework.GenericJob``, and the optional capabilities a kind may
have (no-ops here: a null object for each, never an "if the kind has ..." in the loop)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any, ClassVar

from ..hooks.kueue_async_hook import AsyncKueueHook
from ..kueue.followed_view import FollowedView
from ..kueue.job_progress import Outcome
from ..kueue.quota_guard import Unmanaged
from ..kueue.trigger_event import Kind


class FollowedKind(ABC):
    """What a kind (``KueueJobTrigger``, ``KueueJobSetTrigger``) gives the shared loop."""

    kind: ClassVar[Kind]

    @abstractmethod
    def _kind_kwargs(self) -> dict[str, Any]:
        """The kind's own serialized kwargs: its name and uid keys, and its capabilities' state."""

    @abstractmethod
    def _follow(self) -> AbstractAsyncContextManager[Any]: ...

    @abstractmethod
    def _view(self, snapshot: Any) -> FollowedView:
        """The snapshot's object (present: the loop checked) as the kind's view."""

    @abstractmethod
    def _outcome(self, view: Any) -> Outcome | None: ...

    @abstractmethod
    def _unmanaged(self, view: Any, seconds_since_submit: float) -> Unmanaged | None: ...

    @abstractmethod
    def _line(self, view: Any, position: tuple[int, int] | None, waited: float | None) -> str: ...

    @abstractmethod
    def _start_overdue(self, view: Any, since_admission: float) -> bool | None:
        """None: nothing left to look at (every pod started, or it finished); else whether it is overdue."""

    @abstractmethod
    async def _stuck_reason(self, following: Any, view: Any) -> str | None: ...

    @abstractmethod
    async def _delete_unless_finished(self, hook: AsyncKueueHook, uid: str | None) -> str: ...

    @abstractmethod
    def _payload(self, view: Any, obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        """(the kind's result keys, with ``self._released`` closed; each child Job's failed indexes for the
        log tails)."""

    # --- optional capabilities (no-ops unless the kind has them) -----------------------------------------
    def _capabilities(self) -> AbstractAsyncContextManager[None]:
        """Open what the capabilities need while the object is followed (a ledger writer)."""
        return nullcontext()

    async def _step(self, following: Any, obj: dict[str, Any], view: Any) -> float | None:
        """A change the kind makes while the object runs (a ramp step); seconds until the next one."""
        return None
