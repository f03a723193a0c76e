"""``@task.kueue``: a Python function that runs once per shard, in the shard image, as a Kueue-queued Indexed
Job (``KueueIndexedJobOperator``, with all its parameters: queue, deadlines, packing, retry of only the
unfinished shards, the Kueue tab).

    @task.kueue(queue_name="risk", image="registry/risk-shard:1", completions=100, parallelism=10,
                checkpointing=Checkpointing(conn_id="kueue_blob_default"))
    def price(shard, paths: int) -> float:
        ...  # shard.shard_id, shard.load(), shard.save(...)
        return value

    price(paths=10_000)["results"]   # {"0": ..., "99": ...}

With ``shard_items=[...]`` (or ``ShardItemsBlob(path)``: docs/shard-inputs.md) shard ``i`` reads item ``i``
as ``shard.item``, and ``completions`` left unset is the item count.

The function's source and its arguments (JSON values; templated) travel in the pods' environment; the pods
run ``python -m airflow_kueue_provider.worker.task_function`` (the image needs the worker package and what the
function imports). Each shard's JSON return value is its done record; the task's result gains ``results``
(or ``results_blob`` when they are large: ``operators.task_results``). ``checkpointing=`` is required: the
done records are where the results and the retry's knowledge of finished shards live.

Anyone who can read the namespace's Jobs can read that environment, so an argument whose rendered value
holds a secret Airflow's secrets masker knows (``{{ conn.x.password }}``, a sensitive Variable) is refused
before any Job is built: the pod should read the secret itself (a Kubernetes Secret in ``env``, or the
connection).
"""

from __future__ import annotations

import base64
import functools
import inspect
import json
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from airflow.sdk.bases.decorator import DecoratedOperator, TaskDecorator, task_decorator_factory
from airflow.sdk.definitions._internal.decorators import remove_task_decorator

from ..airflow_compat import AirflowFailException
from ..kueue.names import TASK_CALL_ENV, TASK_RUNNER_MODULE, TASK_SOURCE_ENV
from ..operators.checkpointing import CheckpointSession
from ..operators.indexed_job import KueueIndexedJobOperator
from ..operators.operator_kind import Shards
from ..operators.shard_items_param import holds_secret, redactor
from ..operators.task_results import collect_results
from ..operators.template_file import env_items

MAX_PAYLOAD_BYTES = 256 * 1024
"""The function's source and arguments together (they go into the Job's pod template)."""


class KueueDecoratedOperator(DecoratedOperator, KueueIndexedJobOperator):
    custom_operator_name = "@task.kueue"
    # cmds and arguments are the runner's; the function's arguments (op_args, op_kwargs) are templated instead
    template_fields: Sequence[str] = tuple(
        f
        for f in dict.fromkeys(["op_args", "op_kwargs", *KueueIndexedJobOperator.template_fields])
        if f not in ("cmds", "arguments")
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **KueueIndexedJobOperator.template_fields_renderers,
        "op_args": "py",
        "op_kwargs": "py",
    }
    shallow_copy_attrs: Sequence[str] = ("python_callable",)

    def __init__(self, **kwargs: Any) -> None:
        for taken in ("cmds", "arguments"):
            if kwargs.get(taken) is not None:
                raise AirflowFailException(
                    f"@task.kueue {kwargs.get('task_id')}: {taken}= is the task's own (it runs the decorated "
                    "function); pass the function's inputs as its arguments"
                )
        kwargs["python_callable"] = _per_shard(kwargs["python_callable"], kwargs.get("task_id"))
        super().__init__(cmds=["python", "-m", TASK_RUNNER_MODULE], **kwargs)
        if self._checkpointing is None:
            raise AirflowFailException(
                f"@task.kueue {self.task_id}: set checkpointing=Checkpointing(conn_id=...) (or a Blob "
                "connection id): each shard's return value is recorded there, and a retry runs only the "
                "shards without one"
            )

    def _container_env(self) -> list[Any]:
        """The shard container's env with the function and its call: in every Job the task builds (the first,
        a retry's, a deadline spill's), not only in the one ``execute`` submits."""
        return [*env_items(super()._container_env()), *self._payload_env()]

    def _payload_env(self) -> list[dict[str, str]]:
        """The function's source and its call, checked: no known secret, JSON arguments, a bounded size."""
        self._refuse_secrets()
        call: dict[str, Any] = {"function": self.python_callable.__name__, "args": list(self.op_args)}
        call["kwargs"] = dict(self.op_kwargs)
        try:
            call_json = json.dumps(call)
        except (TypeError, ValueError) as exc:
            raise AirflowFailException(
                f"@task.kueue {self.task_id}: the function's arguments must be JSON values (numbers, "
                f"strings, lists, dicts) to reach the pods: {exc}"
            ) from None
        source = self.get_python_source()
        size = len(source.encode()) + len(call_json.encode())
        if size > MAX_PAYLOAD_BYTES:
            raise AirflowFailException(
                f"@task.kueue {self.task_id}: the function and its arguments are {size} bytes, more than "
                f"{MAX_PAYLOAD_BYTES} (they travel in the Job's pod template): pass large inputs by address "
                "(a Blob path) instead"
            )
        return [
            {"name": TASK_SOURCE_ENV, "value": base64.b64encode(source.encode()).decode()},
            {"name": TASK_CALL_ENV, "value": base64.b64encode(call_json.encode()).decode()},
        ]

    def _refuse_secrets(self) -> None:
        """Fail, naming the argument, when a rendered argument holds (or contains) a value Airflow's secrets
        masker would hide in logs: in the pod's env it would be readable by anyone who can read Jobs."""
        redact = _redactor()
        params = [
            p.name
            for p in inspect.signature(self.python_callable).parameters.values()
            if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        ]
        named = [(params[i] if i < len(params) else f"#{i + 1}", v) for i, v in enumerate(self.op_args)]
        for name, value in [*named, *self.op_kwargs.items()]:
            if _holds_secret(value, redact):
                raise AirflowFailException(
                    f"@task.kueue {self.task_id}: argument {name!r} holds a secret (a value Airflow masks, "
                    "e.g. a connection's password or a sensitive Variable); the function's arguments travel "
                    "in the Job's pod environment, readable by anyone who can read Jobs. Pass the secret "
                    "through a Kubernetes Secret (secrets= or env_from=, as for the operator) or read the "
                    "connection inside the pod instead; no Job was created"
                )

    def get_python_source(self) -> str:
        """The source without its decorator: ``@task.kueue``, or ``@kueue_task`` (imported as is)."""
        source: str = super().get_python_source()  # type: ignore[no-untyped-call]
        return str(remove_task_decorator(source, "@kueue_task"))

    def _succeeded(self, result: dict[str, Any], shards: Shards) -> dict[str, Any]:
        assert isinstance(shards, CheckpointSession)  # checkpointing= is required (checked in __init__)
        collected = collect_results(shards)
        if "results_blob" in collected:
            self.log.info(
                "%d shard results are too large for XCom: they are in %s",
                collected["results_count"],
                collected["results_blob"],
            )
        return {**result, **collected}


_redactor = redactor  # Airflow's public redact (operators.shard_items_param: shard_items= checks it too)
_holds_secret = holds_secret


def _per_shard(function: Callable[..., Any], task_id: object) -> Callable[..., Any]:
    """``function`` as the task is called: without its first parameter, which receives each shard in the pod
    (the DAG passes only the other arguments; Airflow checks them against this signature)."""
    signature = inspect.signature(function)
    params = list(signature.parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not params or params[0].kind not in positional:
        raise AirflowFailException(
            f"@task.kueue {task_id}: the function's first parameter receives the shard "
            f"(def {function.__name__}(shard, ...)): add it"
        )

    @functools.wraps(function)
    def per_shard(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    per_shard.__signature__ = signature.replace(parameters=params[1:])  # type: ignore[attr-defined]
    return per_shard


def kueue_task(
    python_callable: Callable[..., Any] | None = None, multiple_outputs: bool | None = None, **kwargs: Any
) -> TaskDecorator:
    """``@task.kueue(...)``: takes ``KueueIndexedJobOperator``'s parameters (see this module's docstring)."""
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=multiple_outputs,
        decorated_operator_class=KueueDecoratedOperator,
        **kwargs,
    )
