"""The one Jinja environment of the UI pages: the templates in ``plugins/templates/`` (package data), every
one of them autoescaped (``.html`` and ``.svg`` alike; every ``{{ value }}`` is escaped unless it is markup a
template itself made, such as a macro's output), an undefined name an error rather than an empty string.
No template marks anything ``|safe``.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

ENV = Environment(
    loader=PackageLoader("airflow_kueue_provider.plugins", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def render(name: str, /, **context: Any) -> str:
    """The template ``name`` rendered with ``context``."""
    return ENV.get_template(name).render(context)


def render_macro(name: str, macro: str, /, *args: Any) -> str:
    """A macro of the template ``name`` (a part the live stream re-renders, a chart) called with ``args``."""
    return str(getattr(ENV.get_template(name).module, macro)(*args))
