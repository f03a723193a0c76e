"""The provider's pod policy as read on a worker (one home for its option names).

Read through ``hooks.kueue_config`` (the config file and the environment at exec), never through ``conf``:
a DAG file's ``conf.set`` or ``os.environ`` line changes nothing.
"""

from __future__ import annotations

from ..airflow_compat import AirflowFailException
from ..hooks.kueue_options import KueueOptionError, OptionValue, as_config_strings, option_values
from ..kueue.errors import KueueProviderError
from ..kueue.pods.pod_policy import POD_POLICY_OPTIONS, PodPolicy, PolicyConfigError

DEFAULT_QUEUE_OPTION = "default_queue_name"
DEFAULT_NAMESPACE_OPTION = "default_namespace"


class KueueSettingsError(AirflowFailException, KueueProviderError):
    """A ``[kueue]`` option is malformed, or a task leaves a setting to one that is empty: the task fails
    without retries (a retry reads the same configuration)."""


def task_options(keys: tuple[str, ...]) -> dict[str, OptionValue]:
    """``[kueue]`` options as a task reads them: every option checked (``hooks.kueue_options``), a bad one
    failing the task with its name, value and expected form."""
    try:
        return option_values(keys)
    except KueueOptionError as exc:
        raise KueueSettingsError(str(exc)) from None


def configured_pod_policy() -> PodPolicy:
    """The platform team's pod policy from ``[kueue]`` (env at exec, or the file).

    A malformed option fails the task, naming the option and its format."""
    options = as_config_strings(task_options(POD_POLICY_OPTIONS))
    try:
        return PodPolicy.from_options(dict(options))
    except PolicyConfigError as exc:
        raise KueueSettingsError(f"the cluster's pod policy ([kueue] config) is malformed: {exc}") from None


def default_queue_name(task_id: str, queue_name: str | None) -> str:
    """``queue_name``, else ``[kueue] default_queue_name`` (read at execute through the typed reader, so a
    DAG file cannot change it); neither: a clear error before anything is created."""
    if queue_name:
        return queue_name
    default = str(task_options((DEFAULT_QUEUE_OPTION,))[DEFAULT_QUEUE_OPTION]).strip()
    if not default:
        raise KueueSettingsError(
            f"{task_id}: queue_name is not set and [kueue] {DEFAULT_QUEUE_OPTION} is empty: pass "
            "queue_name='<LocalQueue>' to the task, or have the platform team set [kueue] "
            f"{DEFAULT_QUEUE_OPTION} (env AIRFLOW__KUEUE__DEFAULT_QUEUE_NAME). Nothing was created."
        )
    return default


def default_namespace() -> str | None:
    """``[kueue] default_namespace`` (None when empty): a task's namespace when it sets none."""
    return str(task_options((DEFAULT_NAMESPACE_OPTION,))[DEFAULT_NAMESPACE_OPTION]).strip() or None


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
