"""The one Jinja environment of the UI pages: the templates in ``plugins/templates/`` (package data), every
one of them autoescaped (``.html`` and ``.svg`` alike; every ``{{ value }}`` is escaped unless it is markup a
template itself made, such as a macro's output), an undefined name an error rather than an empty string.
No template marks anything ``|safe``.

The pages follow the light or dark mode the user picked in Airflow's UI, which shows them in an iframe of
the same origin. Airflow 3's React UI keeps that choice with ``next-themes``:
``airflow-core/src/airflow/ui/src/context/colorMode/ColorModeProvider.tsx`` wraps the app in
``<ThemeProvider attribute="class" defaultTheme="system" disableTransitionOnChange>`` without a
``storageKey`` (and ``src/main.tsx`` mounts it without one), so next-themes' default applies:
``localStorage["theme"]``, one of ``light``, ``dark`` or ``system`` (``useColorMode.tsx`` lists them; the
built UI of Airflow 3.3.2, ``airflow/ui/dist``, has ``storageKey:i="theme"``). ``base.html`` reads that key
(``AIRFLOW_THEME_KEY``) in an inline script in the head, before the body is painted, and sets
``data-theme`` on ``<html>``; with ``system``, nothing stored or no storage, ``prefers-color-scheme``
decides. It follows a change while the page is open: next-themes writes the key when the user switches,
which fires a ``storage`` event in the iframe (another window of the same origin), and with ``system`` a
change of the OS's scheme fires the media query's ``change``.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

AIRFLOW_THEME_KEY = "theme"
"""The localStorage key of Airflow's UI colour mode: next-themes' default ``storageKey`` (see above)."""

ENV = Environment(
    loader=PackageLoader("airflow_kueue_provider.plugins", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
ENV.globals["airflow_theme_key"] = AIRFLOW_THEME_KEY


def render(name: str, /, **context: Any) -> str:
    """The template ``name`` rendered with ``context``."""
    return ENV.get_template(name).render(context)


def render_macro(name: str, macro: str, /, *args: Any) -> str:
    """A macro of the template ``name`` (a part the live stream re-renders, a chart) called with ``args``."""
    return str(getattr(ENV.get_template(name).module, macro)(*args))
