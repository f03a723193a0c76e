"""Every operator parameter has a ``:param <name>:`` line where IDE hover and Airflow's docs read it: on its
class, or (the parameters every kind shares) on ``KueueOperator``; and no ``:param:`` line names a parameter
that does not exist."""

from __future__ import annotations

import inspect
import re

import pytest

from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator
from airflow_kueue_provider.operators.kueue_operator import KueueOperator

PARAM_LINE = re.compile(r"^\s*:param\s+(?:[^:\s]+\s+)?(\w+):", re.MULTILINE)
"""Sphinx's ``:param name:`` (or ``:param type name:``) at the start of a docstring line."""

KINDS = (KueueIndexedJobOperator, KueueJobSetOperator)


def _documented(cls: type) -> set[str]:
    return set(PARAM_LINE.findall(inspect.getdoc(cls) or ""))


def _parameters(cls: type) -> set[str]:
    """The named parameters of the class's own ``__init__`` (not ``self``, not ``**kwargs``)."""
    signature = inspect.signature(cls.__dict__["__init__"])
    return {
        name
        for name, param in signature.parameters.items()
        if name != "self" and param.kind not in (param.VAR_KEYWORD, param.VAR_POSITIONAL)
    }


def test_the_parser_reads_sphinx_param_lines() -> None:
    doc = "Run it.\n\n:param a: one\n    more\n:param int b: two\n``:param c:`` in prose is not a line\n"
    assert set(PARAM_LINE.findall(doc)) == {"a", "b"}


def test_every_shared_parameter_is_documented_on_the_template() -> None:
    missing = _parameters(KueueOperator) - _documented(KueueOperator)
    assert not missing, f"KueueOperator: add a :param line for {sorted(missing)}"


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.__name__)
def test_every_parameter_of_a_kind_is_documented_on_it_or_on_the_template(kind: type) -> None:
    missing = _parameters(kind) - _documented(kind) - _documented(KueueOperator)
    assert not missing, f"{kind.__name__}: add a :param line for {sorted(missing)}"


@pytest.mark.parametrize("cls", (KueueOperator, *KINDS), ids=lambda cls: cls.__name__)
def test_no_param_line_names_a_parameter_that_does_not_exist(cls: type) -> None:
    known = _parameters(cls) | _parameters(KueueOperator)
    stale = _documented(cls) - known
    assert not stale, f"{cls.__name__}: :param lines for parameters it does not take: {sorted(stale)}"


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.__name__)
def test_a_kind_says_where_the_shared_parameters_are(kind: type) -> None:
    assert "KueueOperator" in (inspect.getdoc(kind) or "")
