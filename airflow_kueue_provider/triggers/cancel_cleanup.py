"""A deferred task marked failed/success or cleared deletes its object on Airflow 3.1 and 3.2 too.

Airflow 3.3 calls the trigger's ``on_kill`` only for such a user action (``asyncio.Task.cancel`` with a
message). 3.1 and 3.2 cancel the trigger without a message, and the same way when the triggerer shuts
down, restarts or hands the trigger to another triggerer; then they call ``cleanup()``. So there, after a
cancel, ``cleanup()`` asks Airflow (the triggerer's supervisor, ``GetTaskStates``) for its task instance's
state: still ``deferred`` -> a shutdown or a handover, the object is left running for the next triggerer;
anything else -> the user acted, the object is deleted as ``on_kill`` does on 3.3. A state that cannot be read
deletes nothing (a wrong delete loses work; a missed one is left to the failure path and the TTL).
"""

from __future__ import annotations

import asyncio
from typing import Any

from airflow.triggers.base import BaseTrigger

DEFERRED = "deferred"


def airflow_calls_on_kill() -> bool:
    """Whether this Airflow calls ``BaseTrigger.on_kill`` on a user action (3.3+)."""
    return "on_kill" in vars(BaseTrigger)


def _state_key(ti: Any) -> str:
    map_index = getattr(ti, "map_index", -1)
    return str(ti.task_id) if map_index is None or map_index < 0 else f"{ti.task_id}_{map_index}"


async def task_instance_state(ti: Any) -> tuple[bool, str | None]:
    """(read, state) of the trigger's task instance, asked of the triggerer's supervisor."""
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
    from asgiref.sync import sync_to_async

    map_index = getattr(ti, "map_index", -1)
    states = await sync_to_async(RuntimeTaskInstance.get_task_states)(
        dag_id=ti.dag_id,
        map_index=map_index if map_index is not None and map_index >= 0 else None,
        task_ids=[ti.task_id],
        run_ids=[ti.run_id],
    )
    by_task = (states or {}).get(ti.run_id)
    if not by_task or _state_key(ti) not in by_task:
        return False, None
    state = by_task[_state_key(ti)]
    return True, None if state is None else str(getattr(state, "value", state))


async def user_cancelled(trigger: Any, log: Any) -> bool:
    """Whether a cancelled trigger was cancelled by a user action (its task instance no longer deferred),
    on an Airflow without ``on_kill``; False on 3.3+ (``on_kill`` does it) or when it cannot tell."""
    if airflow_calls_on_kill():
        return False
    ti = getattr(trigger, "task_instance", None)
    if ti is None:
        return False
    try:
        read, state = await asyncio.wait_for(task_instance_state(ti), timeout=30)
    except Exception as exc:  # the supervisor may be gone (a shutdown): never delete on a guess
        log.info("cancelled; could not read the task instance's state (%s): the object is left", exc)
        return False
    if not read or state == DEFERRED:
        log.info("cancelled while the task instance is %s: a triggerer stop or handover; left running", state)
        return False
    log.info("cancelled while the task instance is %s (a user action)", state)
    return True
