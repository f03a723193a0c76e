"""``shard_items=``: checked before anything is created, handed to the pods, and (for a blob) staged.

An inline list travels in the pods' environment, readable by anyone who can read the namespace's Jobs: an
item holding a value Airflow's secrets masker knows is refused, naming its index (never its value). A
``ShardItemsBlob`` is read with the checkpoint connection and copied, in chunks, into the task instance's
shard container (once per task instance: a retry keeps the items its first try staged), where the pods read
their item with the credential they have for their checkpoints.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from airflow.sdk.definitions.xcom_arg import XComArg
from azure.core.exceptions import ResourceNotFoundError

from ..airflow_compat import AirflowFailException
from ..kueue.checkpoints.shard_item_chunks import chunks, parse_jsonl, staged_index_name
from ..kueue.names import SHARD_ITEMS_BLOB_ENV, SHARD_ITEMS_ENV
from ..kueue.spec.shard_items import (
    MAX_BLOB_ITEMS_BYTES,
    InlineItems,
    InvalidShardItems,
    ShardItems,
    ShardItemsBlob,
    completions_for,
    first_secret_item,
    parse_shard_items,
)
from .checkpointing import CheckpointSession
from .operator_kind import TaskEntry
from .template_file import env_items
from .templated import as_count, is_templated


def redactor() -> Callable[[Any], Any]:
    """Airflow's public ``redact`` of its secrets masker: ``airflow.sdk.log`` from 3.3, before in
    ``airflow.sdk.execution_time.secrets_masker`` (deprecated there since)."""
    try:
        found = importlib.import_module("airflow.sdk.log").redact
    except AttributeError:  # Airflow 3.1 and 3.2
        found = importlib.import_module("airflow.sdk.execution_time.secrets_masker").redact
    return found  # type: ignore[no-any-return]


def holds_secret(value: Any, redact: Callable[[Any], Any]) -> bool:
    """Whether a string in ``value`` (a JSON-like value: keys too) holds a secret the masker knows. Each
    string is asked alone: the masker also hides a dict's values by their key's name (``password_file``),
    which is no known secret."""
    if isinstance(value, str):
        return bool(redact(value) != value)
    if isinstance(value, dict):
        return any(holds_secret(k, redact) or holds_secret(v, redact) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(holds_secret(v, redact) for v in value)
    return False


def checked_items(task_id: str, value: object) -> ShardItems | None:
    """``shard_items`` parsed and checked (size, JSON, no known secret); an error names the field."""
    try:
        parsed = parse_shard_items(value)
    except InvalidShardItems as exc:
        raise AirflowFailException(f"{task_id}: {exc}; no Job was created") from None
    if isinstance(parsed, InlineItems):
        redact = redactor()
        index = first_secret_item(parsed.items, lambda item: holds_secret(item, redact))
        if index is not None:
            raise AirflowFailException(
                f"{task_id}: shard_items item {index} holds a secret (a value Airflow masks, e.g. a "
                "connection's password or a sensitive Variable); the items travel in the Job's pod "
                "environment, readable by anyone who can read Jobs. Pass the secret through a Kubernetes "
                "Secret (secrets= or env_from=) or read the connection inside the pod; no Job was created"
            )
    return parsed


def items_completions(task_id: str, items: ShardItems | None, completions: Any, given: bool) -> Any:
    """The Job's completions for inline ``items``: derived from their count, or checked against it."""
    count = as_count(completions)
    if not isinstance(items, InlineItems) or not isinstance(count, int):
        return count  # a blob's count is checked when it is staged; a bad count is the spec's to name
    try:
        return completions_for(count, len(items), given=given)
    except InvalidShardItems as exc:
        raise AirflowFailException(f"{task_id}: {exc}; no Job was created") from None


def items_env(items: ShardItems | None) -> list[dict[str, str]]:
    """The pod contract's variable for ``items``."""
    if isinstance(items, InlineItems):
        return [{"name": SHARD_ITEMS_ENV, "value": items.encoded}]
    if isinstance(items, ShardItemsBlob):
        return [{"name": SHARD_ITEMS_BLOB_ENV, "value": str(items)}]
    return []


def literal_items(value: object) -> bool:
    """``shard_items`` that no template or XCom changes: checked when the DAG is parsed."""
    if not isinstance(value, (list, tuple, str, ShardItemsBlob)) or is_templated(value):
        return value is None
    return next(iter(XComArg.iter_xcom_references(value)), None) is None


def stage_blob_items(task_id: str, session: CheckpointSession, blob: ShardItemsBlob, completions: int) -> int:
    """Copy the JSON-lines ``blob`` of the base container into the shard container, in chunks (once per
    task instance); returns the item count, which must equal ``completions``."""
    place = session.place
    salt = place.salt_to_create()
    container = place.named(salt)
    session.hook.ensure_container(container, session.prefix, salt)
    target = session.hook.container_hook(container)
    index_name = staged_index_name(session.prefix)
    staged, _ = target.read_json(index_name)
    if staged is not None:
        count = int(staged.get("count") or 0)  # an earlier try's: the items stay with their shards
    else:
        where = f"{session.config.container}/{blob.path}"
        client = session.hook.get_conn().get_blob_client(blob.path)
        try:
            size = int(client.get_blob_properties().size)
            if size > MAX_BLOB_ITEMS_BYTES:  # before reading it
                raise AirflowFailException(
                    f"{task_id}: shard_items blob {where} is {size} bytes, more than {MAX_BLOB_ITEMS_BYTES}: "
                    "split the work into several tasks; no Job was created"
                )
            data = client.download_blob().readall()
        except ResourceNotFoundError:
            raise AirflowFailException(
                f"{task_id}: shard_items blob {where} does not exist: write the items there as JSON lines "
                "(one value per line) first; no Job was created"
            ) from None
        try:
            items = parse_jsonl(data, where)
        except InvalidShardItems as exc:
            raise AirflowFailException(f"{task_id}: {exc}; no Job was created") from None
        count = len(items)
        if count != completions:
            raise AirflowFailException(
                f"{task_id}: completions={completions} but shard_items blob {where} holds {count} items "
                f"(one per shard): set completions={count}; no Job was created"
            )
        for name, document in chunks(session.prefix, items):
            target.write_json(name, document)
        target.write_json(index_name, {"count": count, "source": str(blob)})
    if count != completions:
        raise AirflowFailException(
            f"{task_id}: completions={completions} but the items staged by an earlier try number {count}: "
            "a task instance keeps its items; no Job was created"
        )
    return count


class ShardItemsParam:
    """Mixed into the Job kind (before ``KueueOperator``): the ``shard_items=`` parameter. It is rendered
    here, after the operator's template fields (so ``completions`` is rendered first), and an XCom in it
    (``upstream.output``) makes that task an upstream here, as a template field's would.

    :param shard_items: item ``i`` goes to shard ``i`` (``shard.item``): a list of JSON values (a literal, a
        Jinja string rendering to a JSON list, an upstream's XCom; at most 64 KiB, in the pods' environment)
        or ``ShardItemsBlob(path)`` / ``"blob://<path>"``, a JSON-lines blob in the checkpoint container.
        ``completions`` left at 1 becomes the item count; set, it must match (docs/shard-inputs.md).
    """

    task_id: str
    completions: int | str
    shard_items: Any
    _checkpointing: Any

    def __init__(self, *, shard_items: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.shard_items = shard_items
        XComArg.apply_upstream_relationship(self, shard_items)  # type: ignore[arg-type]
        if isinstance(shard_items, ShardItemsBlob) and self._checkpointing is None:
            raise AirflowFailException(
                f"{self.task_id}: shard_items={shard_items} is read from the checkpoint container and "
                "staged for the pods there: set checkpointing=Checkpointing(...), or pass a list"
            )

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        super().render_template_fields(context, jinja_env)  # type: ignore[misc]  # shard_items is templated
        self._apply_shard_items()

    def _check_literal_items(self) -> None:
        """At parse time, items no template changes: checked, and ``completions`` taken from them."""
        if literal_items(self.shard_items) and not is_templated(self.completions):
            self._apply_shard_items()

    def _apply_shard_items(self) -> ShardItems | None:
        """The items checked; ``completions`` left at 1 (its default) becomes their count, else must
        equal it."""
        items = checked_items(self.task_id, self.shard_items)
        given = as_count(self.completions) != 1
        self.completions = items_completions(self.task_id, items, self.completions, given)
        return items

    def _with_items_env(self, env: Any) -> Any:
        """The container's ``env`` with the items' variable (unchanged without ``shard_items``)."""
        if self.shard_items is None:
            return env
        items = checked_items(self.task_id, self.shard_items)
        items_completions(self.task_id, items, self.completions, True)  # a count changed since: refuse
        return [*env_items(env), *items_env(items)]

    def _entry(self, context: Any, check: bool = True) -> TaskEntry:
        """The template's entry; with a ``ShardItemsBlob``, its items staged for the pods (checked first:
        nothing is created when they do not fit)."""
        entry: TaskEntry = super()._entry(context, check)  # type: ignore[misc]
        items = parse_shard_items(self.shard_items) if check else None
        if isinstance(items, ShardItemsBlob) and isinstance(entry.shards, CheckpointSession):
            stage_blob_items(self.task_id, entry.shards, items, int(self.completions))
        return entry
