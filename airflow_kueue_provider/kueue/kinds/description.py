"""What the provider needs to know of one job kind, below the operator and the trigger (pure).

Kueue's ``jobframework`` gives each kind one small interface and registers it once; this is that
interface's data half for the provider: the API coordinates, the keys a kind's name and uid travel under (the
trigger event, the task's result), how it ends, where its child Jobs are, how its checkpoint Secret is
tagged and whether the worker may seal its uid. Every shared module reads a kind through this description
(``kinds.describe``), so none of them names a kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

Condition = Mapping[str, Any]
"""A finished object's terminal condition as the API has it (``type``, ``status``, ``lastTransitionTime``)."""


@dataclass(frozen=True)
class ApiCoordinates:
    """Where the apiserver serves a kind: ``/apis/<group>/<version>/namespaces/<ns>/<plural>``."""

    group: str
    version: str
    plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def resource(self) -> str:
        """``<plural>.<group>``: how RBAC and error messages name it."""
        return f"{self.plural}.{self.group}"


class EndRule(Protocol):
    """How a kind ends: a Job and a JobSet by a condition, a RayJob by a status field."""

    def finished(self, obj: Mapping[str, Any]) -> Condition | None:
        """The terminal condition (or one made from the kind's status field) when ``obj`` has finished."""
        ...

    def succeeded(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` finished successfully."""
        ...


@dataclass(frozen=True)
class ConditionEnd:
    """A kind that ends with a True condition of type ``success`` or ``failure``."""

    success: str
    failure: str = "Failed"

    def finished(self, obj: Mapping[str, Any]) -> Condition | None:
        for cond in (obj.get("status") or {}).get("conditions") or []:
            if cond.get("type") in (self.success, self.failure) and cond.get("status") == "True":
                return cond  # type: ignore[no-any-return]
        return None

    def succeeded(self, obj: Mapping[str, Any]) -> bool:
        cond = self.finished(obj)
        return cond is not None and cond.get("type") == self.success


def no_child_templates(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A kind whose own pod template is its only one (a Job)."""
    return []


def owns_no_child(child: Mapping[str, Any], parent: Mapping[str, Any]) -> bool:
    """A kind without child Jobs owns none."""
    return False


@dataclass(frozen=True)
class KindDescription:
    """One job kind, registered once (``kinds.register``)."""

    kind: str
    """The API kind (``Job``): also the kind part of an identity seal."""
    api: ApiCoordinates
    key_prefix: str
    """The object's name and uid travel in the trigger event and the task's result as ``<prefix>_name`` and
    ``<prefix>_uid`` (``job_name``, ``job_uid``)."""
    end: EndRule
    secret_tag: str = ""
    """Between ``-checkpoint-`` and the access id in its SAS Secret's name: a Job and a JobSet may share a
    name, and admission binds a Secret to the one kind its name says (``checkpoint_access``). Never hex;
    unique, so only one kind (the Job) has the empty tag."""
    uid_sealed: bool = True
    """The worker seals the uid right after create (it may patch the kind; not a JobSet, docs/tenancy.md)."""
    child_label: str | None = None
    """The label its child Jobs carry with its name (the JobSet controller's); None: it has no child Jobs."""
    child_part_label: str | None = None
    """The label its child Jobs carry with which part of it they are (a JobSet's replicated job)."""
    child_part_noun: str = "part"
    """What the UI calls such a part ("replicated job")."""
    owns_child: Callable[[Mapping[str, Any], Mapping[str, Any]], bool] = field(default=owns_no_child)
    """Whether a Job is one its controller made for this object (by controller uid, never by a label a
    tenant can copy): what proves a child Job is the task's (the UI)."""
    child_templates: Callable[[Mapping[str, Any]], list[dict[str, Any]]] = field(default=no_child_templates)
    """The Job templates inside a manifest of the kind (a JobSet's replicated jobs'): they carry its seal."""
    operator_names: tuple[str, ...] = ()
    """Its operators' class names, as Airflow records a task's operator (what the UI shows a tab for)."""
    hosts_children: bool = False
    """Its objects may be another kind's child Jobs (they carry that kind's ``child_label``)."""
    always_watched: bool = False
    """The shared watch lists it in every namespace (Jobs: every kind's children); other kinds once a
    follower asks, so a cluster without their CRD is never asked for them."""
    served_by: str = ""
    """What must run for the cluster to serve the kind (its controller, Kueue's integration), said when the
    apiserver answers 404 for it; empty: Kubernetes serves it."""

    @property
    def name_key(self) -> str:
        return f"{self.key_prefix}_name"

    @property
    def uid_key(self) -> str:
        return f"{self.key_prefix}_uid"

    @property
    def follower_prefix(self) -> str:
        """The shared watch's follower keys of this kind: ``<plural>/<name>``."""
        return f"{self.api.plural}/"

    def finished(self, obj: Mapping[str, Any]) -> Condition | None:
        return self.end.finished(obj)

    def succeeded(self, obj: Mapping[str, Any]) -> bool:
        return self.end.succeeded(obj)
