"""What the benchmarks share: the local cluster's environment, and writing a run's figures."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def load_devcluster_env() -> Path:
    """Export ``.devcluster/env`` (KUBECONFIG, AIRFLOW_CONN_KUBERNETES_DEFAULT) unless already exported."""
    state = Path(os.environ.get("DEVCLUSTER_STATE", REPO / ".devcluster"))
    for line in (state / "env").read_text().splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export ") :].partition("=")
            os.environ.setdefault(key, shlex.split(value)[0] if value else "")
    return state


def key_value_table(result: dict[str, Any], leave_out: tuple[str, ...] = ()) -> str:
    rows = [(k, v) for k, v in result.items() if k not in leave_out]
    return "| | |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows) + "\n"


def write_results(name: str, result: dict[str, Any], table: str) -> None:
    """``results/<name>.json`` (everything) and ``results/<name>.md`` (the table), printed too."""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(table)
    print(table)
