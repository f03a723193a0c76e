"""The provider's pod policy as read on a worker (one home for its option names).

Read through ``hooks.kueue_config`` (the config file and the environment at exec), never through ``conf``:
a DAG file's ``conf.set`` or ``os.environ`` line changes nothing.
"""

from __future__ import annotations

from ..airflow_compat import AirflowFailException
from ..hooks.kueue_config import kueue_options
from ..kueue.pods.pod_policy import POD_POLICY_OPTIONS, PodPolicy, PolicyConfigError


def configured_pod_policy() -> PodPolicy:
    """The platform team's pod policy from ``[kueue]`` (env at exec, or the file).

    A malformed option fails the task, naming the option and its format."""
    try:
        return PodPolicy.from_options(kueue_options(POD_POLICY_OPTIONS))
    except PolicyConfigError as exc:
        raise AirflowFailException(f"the cluster's pod policy ([kueue] config) is malformed: {exc}") from None


def check_queue_policy(
    task_id: str,
    namespace: str | None,
    queue_name: str,
    priority_class: str | None,
    spill_to: str | None = None,
    raise_priority: str | None = None,
) -> None:
    """The LocalQueues and WorkloadPriorityClasses a task asks for, against ``[kueue]`` allowlists.

    At parse time pass what is known (a templated value, ``{{ ... }}``, or an unset namespace is skipped);
    before submitting, the rendered values: a breach fails the task before anything is created."""
    if not namespace or "{{" in namespace:
        return
    policy = configured_pod_policy()

    def known(value: str | None) -> str | None:
        return None if value is None or "{{" in value else value

    problems = policy.queue_problems(namespace, known(queue_name), known(priority_class))
    problems += policy.queue_problems(
        namespace, known(spill_to), known(raise_priority), "on_deadline_risk spill_to"
    )
    if problems:
        raise AirflowFailException(
            f"{task_id}: the cluster's queue policy ([kueue] config):\n- " + "\n- ".join(problems)
        )
