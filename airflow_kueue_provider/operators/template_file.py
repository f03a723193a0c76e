"""``job_template`` as a file, and the small list helpers of the Job kind's pod parameters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def env_items(env: Any) -> list[Any]:
    if env is None:
        return []
    if isinstance(env, Mapping):
        return [{"name": name, "value": value} for name, value in env.items()]
    return list(env)


def joined(given: list[Any] | None, extra: list[Any]) -> list[Any] | None:
    return [*(given or []), *extra] if given is not None or extra else None


class TemplateFile:
    """``job_template`` named as a ``.yaml``/``.yml`` file: Airflow renders a callable template field by
    calling it, so the file is found (DAG folder, ``template_searchpath``) and rendered for this field
    alone; the operator has no ``template_ext``, which would read every ``*.yaml`` string as a file."""

    SUFFIXES = (".yaml", ".yml")

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def wrap(cls, value: Any) -> Any:
        if isinstance(value, str) and "\n" not in value and value.strip().endswith(cls.SUFFIXES):
            return cls(value.strip())
        return value

    def __call__(self, context: Any, jinja_env: Any) -> str:
        return str(jinja_env.get_template(self.path).render(**context))

    def read(self, jinja_env: Any) -> str:
        source, _, _ = jinja_env.loader.get_source(jinja_env, self.path)
        return str(source)

    def __str__(self) -> str:
        return self.path

    __repr__ = __str__
