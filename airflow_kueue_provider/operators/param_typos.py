"""A misspelt operator parameter, named with the parameters it may have meant.

Airflow's BaseOperator refuses an unknown keyword with "Invalid arguments were passed to ...": true, but it
does not say which parameter was meant, and an operator with 60 parameters makes that hard to see.
``check_parameter_names`` runs first in ``KueueOperator.__init__`` (before anything is parsed), on the
keywords every subclass left over for BaseOperator.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from ..kueue.errors import KueueProviderError

SUGGESTIONS = 3  # close matches named per unknown parameter
CUTOFF = 0.6  # difflib's similarity floor


class UnknownParameter(TypeError, KueueProviderError):
    """An operator got a keyword none of its classes takes (a ``TypeError``, as Airflow's own is)."""


@cache
def _init_parameters(cls: type) -> tuple[str, ...]:
    """Every keyword an ``__init__`` in ``cls``'s MRO names (the operator's, its bases', BaseOperator's)."""
    names: dict[str, None] = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        try:
            params = inspect.signature(init).parameters.values()
        except (TypeError, ValueError):
            continue
        for param in params:
            if param.name != "self" and param.kind not in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
                names[param.name] = None
    return tuple(names)


def unknown_parameters(accepted: Iterable[str], given: Mapping[str, Any]) -> list[str]:
    """The keywords of ``given`` not in ``accepted``; Airflow's private ``_airflow_*`` ones aside."""
    known = set(accepted)
    return [name for name in given if name not in known and not name.startswith("_airflow")]


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``did you mean 'max_failed_indexes'?`` (or the few closest), else what to read."""
    close = difflib.get_close_matches(name, list(candidates), n=SUGGESTIONS, cutoff=CUTOFF)
    if not close:
        return "no parameter is close to it: see docs/parameters.md"
    return "did you mean " + " or ".join(repr(c) for c in close) + "?"


def check_parameter_names(operator: type, task_id: Any, base: type, kwargs: Mapping[str, Any]) -> None:
    """Raise ``UnknownParameter`` naming each keyword in ``kwargs`` that ``base`` (BaseOperator, which gets
    them next) does not take, with the operator's parameters closest to it."""
    unknown = unknown_parameters(_init_parameters(base), kwargs)
    if not unknown:
        return
    candidates = _init_parameters(operator)
    lines = [f"{name}: {did_you_mean(name, candidates)}" for name in unknown]
    noun = "parameter" if len(unknown) == 1 else "parameters"
    raise UnknownParameter(f"{operator.__name__} (task_id: {task_id}) has no {noun} " + "; ".join(lines))
