"""The layers of docs/design.md hold: no import runs back up a layer, and the pure model and the worker
side need no Airflow."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_kueue_provider"
PURE = {"airflow", "kubernetes", "kubernetes_asyncio", "azure", "aiohttp"}
"""What the pure model and the UI's view models must not import: no Airflow, no I/O."""

# layer -> the provider's layers it must not import, and the external packages it must not import. A
# sub-package with rules of its own is a dotted layer ("plugins.views"); one without is held to its parent's.
# Forbidding a layer forbids its sub-packages too; a sub-package may always import its own modules.
RULES: dict[str, tuple[set[str], set[str]]] = {
    "kueue": ({"storage", "hooks", "watch", "triggers", "operators", "decorators", "plugins", "worker",
               "queues"}, PURE),
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
    # the UI's view models: as pure as the model they draw; the rest of the plugin (which reads) sits above
    "plugins.views": ({"storage", "hooks", "watch", "triggers", "operators", "decorators", "plugins",
                       "worker", "queues"}, PURE),
}  # fmt: skip
CLI_MODULES = {"queues": {"triggers", "operators", "plugins", "worker", "watch"}}
"""Command-line modules at the package's top: what they must not import (they work without a scheduler)."""


def _layer_of(parts: tuple[str, ...]) -> str:
    """The most specific layer with rules holding a module (its dotted path below the package's top):
    ``("plugins", "views", "x")`` is in ``plugins.views``, ``("plugins", "x")`` in ``plugins``."""
    for depth in range(len(parts), 1, -1):
        if ".".join(parts[:depth]) in RULES:
            return ".".join(parts[:depth])
    return parts[0] if parts else ""


def _imported_modules(path: Path, root: Path) -> set[str]:
    """The absolute names of the modules ``path`` imports, relative imports resolved against its package
    (``from ...kueue.x`` in ``root/plugins/views/`` is ``airflow_kueue_provider.kueue.x``)."""
    package = (root.name, *path.parent.relative_to(root).parts)
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.add(node.module or "")
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1]
            modules = [node.module] if node.module else [alias.name for alias in node.names]
            names |= {".".join((*base, module)) for module in modules}
    return names


def _imports(path: Path, root: Path = PACKAGE) -> set[str]:
    """What a module imports: provider modules as their layer (dotted for a sub-package with rules),
    others as the distribution's top-level name."""
    result = set()
    for name in _imported_modules(path, root):
        if name.startswith(f"{root.name}."):
            result.add(_layer_of(tuple(name.split(".")[1:])))
        elif name:
            result.add(name.split(".")[0])
    return result


def _forbidden(layer: str, imported: set[str]) -> set[str]:
    """Which of ``imported`` (layers and distributions) ``layer``'s rule forbids: a forbidden layer's
    sub-packages too, never the layer's own modules."""
    layers, packages = RULES[layer]

    def up(name: str) -> bool:
        own = name == layer or name.startswith(f"{layer}.")
        return not own and (name in layers or name.split(".")[0] in layers)

    return {name for name in imported if name in packages or up(name)}


def _violations(layer: str, root: Path = PACKAGE) -> list[str]:
    """Each module of ``layer`` (its sub-packages without rules of their own included) importing up."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if len(parts) < 2 or _layer_of(parts) != layer:
            continue
        bad = _forbidden(layer, _imports(path, root))
        if bad:
            problems.append(f"{path.relative_to(root)} imports {sorted(bad)}")
    return problems


@pytest.mark.parametrize("layer", sorted(RULES))
def test_no_import_runs_back_up_a_layer(layer: str) -> None:
    problems = _violations(layer)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("module", sorted(CLI_MODULES))
def test_a_command_line_module_imports_no_orchestration(module: str) -> None:
    bad = _imports(PACKAGE / f"{module}.py") & CLI_MODULES[module]
    assert not bad, f"{module}.py imports {sorted(bad)}"


def test_every_layer_has_rules() -> None:
    layers = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    top = {layer for layer in RULES if "." not in layer}
    assert layers == top, f"give these packages layering rules: {sorted(layers ^ top)}"
    missing = [layer for layer in RULES if not (PACKAGE / layer.replace(".", "/") / "__init__.py").exists()]
    assert not missing, f"rules for packages that do not exist: {missing}"


def _module(root: Path, relative: str, source: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def test_a_sub_package_module_importing_up_a_layer_is_caught(tmp_path: Path) -> None:
    root = tmp_path / "airflow_kueue_provider"
    view = _module(
        root,
        "plugins/views/chart.py",
        "from ...kueue.quantity import parse_quantity\n"
        "from ...hooks.kueue_hook import KueueHook\n"
        "from .. import dashboard_data\n"
        "from ..read_caps import ReadCaps\n"
        "from . import grid\n"
        "from .grid import Band\n"
        "import kubernetes.client\n",
    )
    _module(root, "plugins/views/grid.py", "from ...kueue.index_set import IndexSet\n")
    _module(root, "plugins/page.py", "from .views.grid import Band\nfrom ..hooks import kueue_hook\n")
    _module(root, "kueue/cost.py", "from ..plugins.views.grid import Band\nfrom . import names\n")

    assert _imports(view, root) == {"kueue", "hooks", "plugins", "plugins.views", "kubernetes"}
    assert _violations("plugins.views", root) == [
        "plugins/views/chart.py imports ['hooks', 'kubernetes', 'plugins']"
    ]
    assert _violations("plugins", root) == []  # the plugin may use its views and read through hooks
    assert _violations("kueue", root) == [
        "kueue/cost.py imports ['plugins.views']"
    ]  # nothing pure imports the UI
