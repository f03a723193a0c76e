"""The layers of docs/design.md hold: no import runs back up a layer, and the pure model and the worker
side need no Airflow."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_kueue_provider"

# layer -> the provider's layers it must not import, and the external packages it must not import
RULES: dict[str, tuple[set[str], set[str]]] = {
    "kueue": ({"storage", "hooks", "watch", "triggers", "operators", "decorators", "plugins", "worker",
               "queues"},
              {"airflow", "kubernetes", "kubernetes_asyncio", "azure", "aiohttp"}),
    "storage": ({"hooks", "watch", "triggers", "operators", "decorators", "plugins", "worker", "queues"},
                {"airflow", "kubernetes"}),
    "worker": ({"hooks", "watch", "triggers", "operators", "decorators", "plugins", "queues"},
               {"airflow", "kubernetes"}),
    "hooks": ({"watch", "triggers", "operators", "decorators", "plugins", "worker", "queues"}, set()),
    "watch": ({"triggers", "operators", "decorators", "plugins", "worker", "queues"}, set()),
    "triggers": ({"operators", "decorators", "plugins", "worker", "queues"}, set()),
    "operators": ({"decorators", "plugins", "worker", "queues"}, set()),
    # @task.kueue: the operator with a function; it names the runner module (the worker's), never imports it
    "decorators": ({"plugins", "worker", "queues"}, set()),
    # the UI plugin reads through hooks and the watch hub; it never runs a task's orchestration
    "plugins": ({"triggers", "operators", "decorators", "worker", "queues"}, set()),
}  # fmt: skip
CLI_MODULES = {"queues": {"triggers", "operators", "plugins", "worker", "watch"}}
"""Command-line modules at the package's top: what they must not import (they work without a scheduler)."""


def _imports(path: Path) -> set[str]:
    """Top-level names a module imports: provider layers as their package name, others as the distribution."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: ..hooks.x from a layer's module (.hooks.x from the package's top)
                parts = (node.module or "").split(".")
                top = path.parent == PACKAGE
                names.add(f"airflow_kueue_provider.{parts[0]}" if node.level == (1 if top else 2) else "")
            else:
                names.add(node.module or "")
    result = set()
    for name in names:
        if name.startswith("airflow_kueue_provider."):
            result.add(name.split(".")[1])
        elif name:
            result.add(name.split(".")[0])
    return result


@pytest.mark.parametrize("layer", sorted(RULES))
def test_no_import_runs_back_up_a_layer(layer: str) -> None:
    forbidden_layers, forbidden_packages = RULES[layer]
    problems = []
    for path in sorted((PACKAGE / layer).glob("*.py")):
        bad = _imports(path) & (forbidden_layers | forbidden_packages)
        if bad:
            problems.append(f"{path.relative_to(PACKAGE)} imports {sorted(bad)}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("module", sorted(CLI_MODULES))
def test_a_command_line_module_imports_no_orchestration(module: str) -> None:
    bad = _imports(PACKAGE / f"{module}.py") & CLI_MODULES[module]
    assert not bad, f"{module}.py imports {sorted(bad)}"


def test_every_layer_has_rules() -> None:
    layers = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert layers == set(RULES), f"give these packages layering rules: {sorted(layers ^ set(RULES))}"
