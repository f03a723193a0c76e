"""The ``[kueue]`` options' types and defaults, and the one validator every read goes through.

Each option is declared once here (``OPTIONS``): its type (``string``, ``boolean``, ``integer``), its default
as the config file would spell it, and for counts a minimum. ``get_provider_info`` publishes the same types,
so ``airflow config list`` and the docs agree with what is enforced.

A typed read (:func:`option_values`) takes every declared option from one source (``kueue_config``: the
config file and the environment at exec, never ``conf``) and parses each, so a bad value anywhere in
``[kueue]`` fails the first read of the process (the UI plugin's settings, the watch hub's caps, a task's pod
policy) with :class:`KueueOptionError` naming the option, the bad value and the expected form, instead of a
wrong value silently meaning "false" or "default" later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..kueue.errors import KueueProviderError
from .kueue_config import ENV_PREFIX, SECTION, kueue_options

STRING, BOOLEAN, INTEGER = "string", "boolean", "integer"
TRUE_WORDS = frozenset({"true", "t", "1", "yes", "y", "on"})
FALSE_WORDS = frozenset({"false", "f", "0", "no", "n", "off"})

OptionValue = str | bool | int


@dataclass(frozen=True)
class OptionSpec:
    """One option's type, default (as the config file spells it) and, for counts, the least allowed."""

    type: str = STRING
    default: str = ""
    minimum: int | None = None


def _count(default: int) -> OptionSpec:
    return OptionSpec(INTEGER, str(default), 1)


_FLAG = OptionSpec(BOOLEAN, "False")

OPTIONS: Mapping[str, OptionSpec] = {
    "identity_key": OptionSpec(),
    "kubernetes_conn_id": OptionSpec(STRING, "kubernetes_default"),
    "default_queue_name": OptionSpec(),
    "default_namespace": OptionSpec(),
    "ui_namespaces": OptionSpec(),
    "ui_streams_per_user": _count(10),
    "ui_streams_total": _count(100),
    "ui_reads_per_user": _count(8),
    "ui_reads_total": _count(32),
    "watch_max_objects": _count(10_000),
    "watch_max_mib": _count(128),
    "allowed_namespaces": OptionSpec(),
    "allowed_service_accounts": OptionSpec(),
    "allowed_local_queues": OptionSpec(),
    "allowed_priority_classes": OptionSpec(),
    "allowed_pod_priority_classes": OptionSpec(),
    "allowed_runtime_classes": OptionSpec(),
    "allow_privileged_pods": _FLAG,
    "allow_host_namespaces": _FLAG,
    "allow_host_path_volumes": _FLAG,
    "allowed_capabilities": OptionSpec(),
    "allowed_volume_types": OptionSpec(),
    "allowed_secrets": OptionSpec(),
    "allowed_config_maps": OptionSpec(),
    "allowed_persistent_volume_claims": OptionSpec(),
}


class KueueOptionError(KueueProviderError, ValueError):
    """A ``[kueue]`` option's value does not parse as its type; the message names option, value and form.
    (No Airflow here: ``get_provider_info`` imports this module while Airflow loads its configuration; a
    task turns it into an ``AirflowFailException``, ``operators.settings``.)"""

    def __init__(self, option: str, raw: str, expected: str) -> None:
        super().__init__(
            f"[{SECTION}] {option} must be {expected}, got {raw!r}: fix {ENV_PREFIX}{option.upper()} or "
            f"[{SECTION}] {option} in airflow.cfg (on every worker, triggerer and API server)"
        )
        self.option, self.raw = option, raw


def parse_option(option: str, raw: str | None) -> OptionValue:
    """``raw`` (None: unset) as ``option``'s type; unset or blank counts and flags take the default."""
    spec = OPTIONS[option]
    if spec.type == STRING:
        return spec.default if raw is None else raw
    text = (raw or "").strip() or spec.default
    if spec.type == BOOLEAN:
        if text.lower() in TRUE_WORDS:
            return True
        if text.lower() in FALSE_WORDS:
            return False
        raise KueueOptionError(option, str(raw), "true or false")
    least = spec.minimum if spec.minimum is not None else 0
    expected = f"a whole number of at least {least} (default {spec.default})"
    try:
        value = int(text)
    except ValueError:
        raise KueueOptionError(option, str(raw), expected) from None
    if value < least:
        raise KueueOptionError(option, str(raw), expected)
    return value


def option_values(keys: Iterable[str] = ()) -> dict[str, OptionValue]:
    """Every declared option parsed (the first bad one raises :class:`KueueOptionError`), then those of
    ``keys`` (all of them when empty) returned typed."""
    raw = kueue_options(tuple(OPTIONS))
    parsed = {key: parse_option(key, raw[key]) for key in OPTIONS}
    wanted = tuple(keys) or tuple(OPTIONS)
    return {key: parsed[key] for key in wanted}


def option_text(key: str) -> str:
    """A string option (after every option was checked)."""
    return str(option_values((key,))[key])


def option_count(key: str) -> int:
    """An integer option (after every option was checked)."""
    value = option_values((key,))[key]
    assert isinstance(value, int) and not isinstance(value, bool)
    return value


def as_config_strings(values: Mapping[str, OptionValue]) -> dict[str, str]:
    """Checked values back as the strings the pure parsers read (``true``/``false`` for flags)."""
    return {key: (str(v).lower() if isinstance(v, bool) else str(v)) for key, v in values.items()}
