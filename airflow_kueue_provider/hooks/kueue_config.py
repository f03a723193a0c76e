"""The provider's ``[kueue]`` options, read so that a DAG file cannot change them.

Airflow's ``conf`` is the wrong source for a policy: a DAG file runs in the worker's process before its
task, and one ``conf.set("kueue", ...)`` or ``os.environ["AIRFLOW__KUEUE__..."] = ...`` line at its top would
loosen what the platform team set. So the options are read from two places only, each as the process got it:

- the environment **as at exec**: on Linux ``/proc/self/environ`` (the block the kernel handed the process;
  a later ``os.environ[...] =`` or ``putenv`` does not change it), elsewhere ``os.environ``;
- the Airflow config FILE that environment names (``AIRFLOW_CONFIG``, else ``$AIRFLOW_HOME/airflow.cfg``,
  else ``~/airflow/airflow.cfg``), parsed here, never through ``conf``.

An ``AIRFLOW__KUEUE__<OPTION>`` variable wins over the file, as in Airflow. ``_cmd`` / ``_secret`` variants
are not read. Code that rewrites this module in-process is out of reach of any in-process check: the
admission policy in ``deploy/policy`` is the platform's backstop (docs/tenancy-policy.md).
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

SECTION = "kueue"
ENV_PREFIX = f"AIRFLOW__{SECTION.upper()}__"
PROC_ENVIRON = Path("/proc/self/environ")


def environment_at_exec(proc_environ: Path = PROC_ENVIRON) -> dict[str, str]:
    """The process's environment as it was at exec (``os.environ`` where ``/proc`` has none)."""
    try:
        raw = proc_environ.read_bytes()
    except OSError:
        return dict(os.environ)
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


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
        if (value := self.environ.get(ENV_PREFIX + key.upper())) is not None:
            return value
        parser = configparser.RawConfigParser(strict=False)
        try:
            parser.read(self.config_file(), encoding="utf-8")
        except (OSError, configparser.Error):
            return None
        return parser.get(SECTION, key, fallback=None)


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
    source = current_source()
    return {key: source.option(key) for key in keys}
