"""What a ``@task.kueue`` pod runs: the decorated function, once per shard of the pod.

The operator passes the function's source and its (JSON) arguments in the pod's environment
(``TASK_SOURCE_ENV``, ``TASK_CALL_ENV``). Each shard calls ``function(shard, *args, **kwargs)`` with the
shard's SDK handle (``shard.shard_id``, ``shard.load()``, ``shard.save(...)``, ``shard.critical()``), and its
JSON return value becomes the shard's done record (``{"result": value}``), from which the operator collects
the results. A shard that raises fails alone: the others of the pod go on, the pod exits 1 naming it, and a
retry runs only the unfinished shards. Run as ``python -m airflow_kueue_provider.worker.task_function``.
"""

from __future__ import annotations
import __future__

import base64
import binascii
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ..kueue.errors import KueueProviderError
from ..kueue.names import TASK_CALL_ENV, TASK_SOURCE_ENV
from .shard import Shard

log = logging.getLogger(__name__)
EXIT_BAD_PAYLOAD = 2


class BadTaskPayload(ValueError, KueueProviderError):
    """The pod's task variables are missing or unreadable (a pod not made by ``@task.kueue``)."""


def load_task(environ: Mapping[str, str]) -> tuple[Callable[..., Any], list[Any], dict[str, Any]]:
    """The function (defined from its source in a module of its own) and its arguments."""
    try:
        source = base64.b64decode(environ[TASK_SOURCE_ENV], validate=True).decode()
        call = json.loads(base64.b64decode(environ[TASK_CALL_ENV], validate=True))
        name, args, kwargs = call["function"], list(call["args"]), dict(call["kwargs"])
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:
        raise BadTaskPayload(
            f"{TASK_SOURCE_ENV}/{TASK_CALL_ENV} missing or unreadable ({exc!r}): this module runs the pods "
            "of a @task.kueue task"
        ) from None
    module: dict[str, Any] = {"__name__": "__kueue_task__"}
    # annotations stay text (PEP 563): the DAG file's imports (typing, its own types) are not in the pod
    flags = __future__.annotations.compiler_flag
    code = compile(source, f"<@task.kueue {name}>", "exec", flags=flags, dont_inherit=True)
    exec(code, module)  # the DAG author's own code, as in a DAG
    function = module.get(name)
    if not callable(function):
        raise BadTaskPayload(f"the task's source defines no function {name!r}")
    return function, args, kwargs


def run_shard(function: Callable[..., Any], shard: Shard, args: list[Any], kwargs: dict[str, Any]) -> None:
    """One shard: the call, then its done record with the result (JSON, or the shard fails saying so)."""
    value = function(shard, *args, **kwargs)
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"shard {shard.shard_id}: {getattr(function, '__name__', 'the function')} returned "
            f"{type(value).__name__}, which is not JSON ({exc}): return numbers, strings, lists or dicts "
            "(large outputs belong in Blob, with their address returned)"
        ) from None
    shard.mark_done({"result": value})


def main(environ: Mapping[str, str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    environ = os.environ if environ is None else environ
    try:
        function, args, kwargs = load_task(environ)
    except BadTaskPayload as exc:
        log.error("%s", exc)
        return EXIT_BAD_PAYLOAD
    for shard in Shard.each_from_env(environ):
        with shard:
            run_shard(function, shard, args, kwargs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
