"""Set ``[kueue]`` options for in-process operators in a test.

The provider reads them from the config file and the environment at exec (``hooks.kueue_config``), so a
``monkeypatch.setenv`` in the test process is not seen, on purpose: a DAG file could do the same. Tests swap
the source instead (a DAG file that did this would be rewriting the provider, out of any in-process check's
reach: docs/tenancy-policy.md).
"""

from __future__ import annotations

import pytest

from airflow_kueue_provider.hooks import kueue_config
from airflow_kueue_provider.hooks.kueue_config import ConfigSource, environment_at_exec


def set_kueue_options(monkeypatch: pytest.MonkeyPatch, **options: str) -> None:
    """``[kueue]`` options as if the platform had set ``AIRFLOW__KUEUE__<OPTION>`` for the process."""
    env = {**environment_at_exec(), **{f"AIRFLOW__KUEUE__{k.upper()}": v for k, v in options.items()}}
    monkeypatch.setattr(kueue_config, "current_source", lambda: ConfigSource(env))
