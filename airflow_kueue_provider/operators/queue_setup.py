"""``KueueQueueSetupOperator``: apply the Kueue queues declared next to the DAGs, from a maintenance DAG (or
``python -m airflow_kueue_provider.queues``), idempotently, with a drift report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from ..airflow_compat import AirflowException, AirflowFailException
from ..hooks.queue_declarations import apply_declarations, conflict_summary, load_declarations, report
from ..hooks.queue_setup_hook import KueueQueueSetupHook
from ..kueue.errors import KueueProviderError
from ..kueue.identity.queue_ownership import PREVIOUS_MANAGERS
from ..kueue.queues.queue_setup import InvalidQueueDeclaration

if TYPE_CHECKING:
    from airflow.sdk import Context


class QueueDrift(AirflowException, KueueProviderError):
    """``check_only`` with ``fail_on_drift``: some declared object is missing or differs in the cluster."""


class QueueConflict(AirflowException, KueueProviderError):
    """Declared fields are owned by other field managers (someone set them by hand or with another tool):
    those objects were left as they are; ``force=True`` takes the fields."""


class KueueQueueSetupOperator(BaseOperator):
    """Apply ResourceFlavors, Cohorts, ClusterQueues, LocalQueues, WorkloadPriorityClasses and Topologies
    declared in YAML (v1beta2, or the seed's v1beta1, converted) to the cluster, in dependency order, with
    server-side apply as the field manager ``airflow-kueue-provider-queues``: a second run with the same
    declarations changes nothing, and a field removed from a declaration is removed from the cluster. Every
    object's outcome is logged and returned; a live object that had drifted from its declaration is listed
    with each difference before it is set back. A declared field another field manager owns (set by hand,
    or by another tool) is not taken: the object is left as it is, the field and its manager are named, and
    the task fails after applying the rest, unless ``force``. Fields written by client-side calls
    (``kubectl apply`` without ``--server-side``, the Python client) are taken over once, by the first apply.

    :param declarations: YAML files or directories of them; a relative path is found from the DAG file's
        folder. Templated.
    :param check_only: only report (``missing``, ``drifted``, ``in sync``), change nothing.
    :param fail_on_drift: with ``check_only``, fail the task when anything is missing or drifted (for an
        alerting DAG).
    :param force: take declared fields other field managers own (each is logged with its manager).
    :param adopt_managers: the field managers of client-side writes the first apply takes over (default
        ``kubectl-client-side-apply`` and ``OpenAPI-Generator``, the Python client's); ``()`` when other
        scripts write these objects with the Python client and their fields must be reported as conflicts.
    :param kubernetes_conn_id: a connection whose identity may manage Kueue's cluster-scoped objects
        (``deploy/rbac/queue-admin.yaml``), not the workers' namespaced one.
    """

    template_fields: Sequence[str] = ("declarations",)

    def __init__(
        self,
        *,
        declarations: str | Sequence[str],
        check_only: bool = False,
        fail_on_drift: bool = False,
        force: bool = False,
        adopt_managers: Sequence[str] = PREVIOUS_MANAGERS,
        kubernetes_conn_id: str = "kubernetes_default",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.declarations = [declarations] if isinstance(declarations, str) else list(declarations)
        if not self.declarations:
            raise AirflowFailException(f"{self.task_id}: declarations names no file or directory")
        if fail_on_drift and not check_only:
            raise AirflowFailException(
                f"{self.task_id}: fail_on_drift needs check_only=True (applying sets drift back)"
            )
        self.check_only = check_only
        self.fail_on_drift = fail_on_drift
        self.force = force
        self.adopt_managers = tuple(adopt_managers)
        self.kubernetes_conn_id = kubernetes_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        try:
            objects = load_declarations([self._resolve(p) for p in self.declarations])
        except InvalidQueueDeclaration as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from exc
        hook = KueueQueueSetupHook(self.kubernetes_conn_id)
        outcomes = apply_declarations(
            hook, objects, check_only=self.check_only, force=self.force, adopt_managers=self.adopt_managers
        )
        for outcome in outcomes:
            self.log.info("%s: %s", outcome.ref, outcome.action)
            for line in outcome.drift:
                self.log.warning("%s drifted: %s", outcome.ref, line)
            for conflict in outcome.conflicts:
                taken = "taken (force=True)" if outcome.action == "updated" else "left"
                self.log.warning("%s: %s, %s", outcome.ref, conflict, taken)
        result = report(outcomes)
        self.log.info("queues %s: %s", "checked" if self.check_only else "applied", result["counts"])
        bad = [o for o in outcomes if o.action in ("missing", "drifted")]
        if self.fail_on_drift and bad:
            raise QueueDrift(
                "queue declarations differ from the cluster: "
                + "; ".join(
                    f"{o.ref} {o.action}" + (f" ({', '.join(o.drift)})" if o.drift else "") for o in bad
                )
            )
        if conflicts := conflict_summary(outcomes):
            raise QueueConflict(
                f"declared fields are owned by other field managers, left as they are: {conflicts}. Change "
                "the declaration to match, or pass force=True to take them"
            )
        return result

    def _resolve(self, given: str) -> Path:
        path = Path(given)
        if path.is_absolute() or self.dag is None or not getattr(self.dag, "fileloc", None):
            return path
        return Path(self.dag.fileloc).parent / path
