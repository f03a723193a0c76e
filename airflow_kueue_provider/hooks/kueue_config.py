"""The provider's ``[kueue]`` options, read so that a DAG file cannot change them.

Airflow's ``conf`` is the wrong source for a policy: a DAG file runs in the worker's process before its
task, and one ``conf.set("kueue", ...)`` or ``os.environ["AIRFLOW__KUEUE__..."] = ...`` line at its top would
loosen what the platform team set. So the options are read from two places only, each as the process got it:

- the environment **as at exec**: on Linux ``/proc/self/environ`` (the block the kernel handed the process;
  a later ``os.environ[...] =`` or ``putenv`` does not change it), elsewhere ``os.environ``;
- the Airflow config FILE that environment names (``AIRFLOW_CONFIG``, else ``$AIRFLOW_HOME/airflow.cfg``,
  else ``~/airflow/airflow.cfg``), parsed here, never through ``conf``.

An ``AIRFLOW__KUEUE__<OPTION>`` variable wins over the file, as in Airflow. ``_cmd`` / ``_secret`` variants
are not read.

``setproctitle`` (Airflow calls it in the executor's workers, the supervisor, the task runner and the API
server) writes the process title over the memory ``/proc/self/environ`` shows, unless ``SPT_NOENV`` is set
before its first call: the file then holds the title and no variable. So the environment at exec is taken
when this module is first imported (the package sets ``SPT_NOENV``, and a forked child inherits both), and
read again while the file is intact; where it was overwritten before either, the options come from
``os.environ`` (which a DAG file can change) with a warning naming ``SPT_NOENV``.

This keeps a DAG file's ``os.environ`` or ``conf.set`` line from loosening the policy by accident; it is not a
boundary against DAG code set on it (one line can replace ``current_source``): DAG authors of one deployment
are trusted alike (docs/tenancy.md), and the admission policies of ``deploy/policy`` are the platform's
backstop (docs/tenancy-policy.md).
"""

from __future__ import annotations

import configparser
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

SECTION = "kueue"
ENV_PREFIX = f"AIRFLOW__{SECTION.upper()}__"
PROC_ENVIRON = Path("/proc/self/environ")


log = logging.getLogger(__name__)


def _read_environ(proc_environ: Path) -> dict[str, str] | None:
    """The variables in ``proc_environ``; None when it cannot be read or holds none (overwritten)."""
    try:
        raw = proc_environ.read_bytes()
    except OSError:
        return None
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env or None


_AT_IMPORT = _read_environ(PROC_ENVIRON)
"""The environment at exec as this module's first import found it (None: no /proc, or already overwritten)."""
_warned: list[bool] = []


def environment_at_exec(proc_environ: Path = PROC_ENVIRON) -> dict[str, str]:
    """The process's environment as it was at exec: ``/proc/self/environ`` while intact, else as it was at
    this module's first import; ``os.environ`` where neither is there (no /proc, or ``setproctitle``
    overwrote it before the provider was imported)."""
    if (env := _read_environ(proc_environ)) is not None:
        return env
    if proc_environ == PROC_ENVIRON and _AT_IMPORT is not None:
        return dict(_AT_IMPORT)
    if proc_environ.exists() and not _warned:
        _warned.append(True)
        log.warning(
            "%s holds no variables (setproctitle overwrote it before the provider was loaded): [kueue] "
            "options are read from os.environ, which a DAG file can change. Set SPT_NOENV=1 in the "
            "environment of every Airflow process (docs/tenancy-policy.md)",
            proc_environ,
        )
    return dict(os.environ)


@dataclass(frozen=True)
class ConfigSource:
    """Where ``[kueue]`` options come from: an environment and the config file it names."""

    environ: Mapping[str, str]

    def config_file(self) -> Path:
        if path := self.environ.get("AIRFLOW_CONFIG"):
            return Path(path).expanduser()
        home = self.environ.get("AIRFLOW_HOME") or str(Path("~/airflow").expanduser())
        return Path(home).expanduser() / "airflow.cfg"

    def option(self, key: str) -> str | None:
        """The option's value: the environment's ``AIRFLOW__KUEUE__<KEY>``, else the file's; None if unset."""
        return self.options((key,))[key]

    def options(self, keys: tuple[str, ...]) -> dict[str, str | None]:
        """Several options, the file parsed once (only when a key is not in the environment)."""
        values = {key: self.environ.get(ENV_PREFIX + key.upper()) for key in keys}
        if all(value is not None for value in values.values()):
            return values
        parser = configparser.RawConfigParser(strict=False)
        try:
            parser.read(self.config_file(), encoding="utf-8")
        except (OSError, configparser.Error):
            return values
        return {key: parser.get(SECTION, key, fallback=None) if v is None else v for key, v in values.items()}


def process_source() -> ConfigSource:
    """This process's source: its environment at exec and the config file that names."""
    return ConfigSource(environment_at_exec())


# The source every read goes through; tests of in-process operators swap it (monkeypatch).
current_source: Callable[[], ConfigSource] = process_source


def kueue_option(key: str, fallback: str | None = None) -> str | None:
    """One ``[kueue]`` option as the platform set it (the one reader of every ``[kueue]`` option)."""
    value = current_source().option(key)
    return fallback if value is None else value


def kueue_options(keys: tuple[str, ...]) -> dict[str, str | None]:
    """Several options from one source (one read of the environment)."""
    return current_source().options(keys)
