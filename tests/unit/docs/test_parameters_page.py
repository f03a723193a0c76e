"""docs/parameters.md names every parameter an operator's ``__init__`` takes (its own and the shared ones of
the provider classes it inherits, Airflow's BaseOperator left out): a parameter added without a row is
one a DAG author reading the docs never learns about."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path

import pytest

from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator

PAGE = Path(__file__).resolve().parents[3] / "docs" / "parameters.md"
OPERATORS = [KueueIndexedJobOperator, KueueJobSetOperator]


def passed_to_super(init: object) -> set[str]:
    """The keywords an ``__init__`` gives ``super().__init__(...)`` itself: plumbing, not the user's."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(init)))  # type: ignore[arg-type]
    return {
        kw.arg
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "__init__"
        and isinstance(call.func.value, ast.Call)
        and isinstance(call.func.value.func, ast.Name)
        and call.func.value.func.id == "super"
        for kw in call.keywords
        if kw.arg
    }


def init_parameters(cls: type) -> dict[str, str]:
    """Parameter name -> the provider class whose ``__init__`` declares it (subclass first), less those a
    subclass fills in itself (``keep_on_failure=keep_job_on_failure``)."""
    found: dict[str, str] = {}
    supplied: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or not klass.__module__.startswith("airflow_kueue_provider"):
            continue
        for name, param in inspect.signature(init).parameters.items():
            if name == "self" or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
                continue
            if name not in supplied:
                found.setdefault(name, klass.__name__)
        supplied |= passed_to_super(init)
    return found


def page_names() -> set[str]:
    """Every name written as code on the page (a table row lists several: `tolerations`, `affinity`, ...)."""
    return set(re.findall(r"`(\w+)`", PAGE.read_text()))


@pytest.mark.parametrize("operator", OPERATORS, ids=lambda c: c.__name__)
def test_every_init_parameter_is_on_the_parameters_page(operator: type) -> None:
    named = page_names()
    missing = {n: owner for n, owner in init_parameters(operator).items() if n not in named}
    assert missing == {}, f"add a row to docs/parameters.md for each (parameter: declared by): {missing}"


def test_the_walk_sees_the_shared_and_the_own_parameters() -> None:
    params = init_parameters(KueueIndexedJobOperator)
    assert {"queue_name", "completions", "shards_per_pod", "checkpointing"} <= set(params)
    assert "task_id" not in params and "retries" not in params  # BaseOperator's: Airflow's docs
    assert "keep_on_failure" not in params  # the kind passes its keep_job_on_failure as it
