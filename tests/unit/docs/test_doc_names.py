"""The names a reader applies from the docs (docs/first-dag.md, the quick start, docs/process-node.md) are
the docs' alone on the shared bed: no example DAG and no other test applies the same DAG id, namespace,
ResourceFlavor, ClusterQueue, LocalQueue or checkpoint container. A reader trying the page on the bed while
the test suite runs must not have the suite's clean-up delete their namespace, nor find the suite's Jobs in
their queue; only the tests that run these pages as written use them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.integration.examples.readme_blocks import marked_blocks

REPO = Path(__file__).resolve().parents[3]
PAGES = {"first-dag": REPO / "docs" / "first-dag.md", "process-node": REPO / "docs" / "process-node.md"}
RUNNERS = {  # the tests that run the pages as written (and the checks of their blocks)
    "tests/integration/examples/test_first_dag.py",
    "tests/integration/examples/readme_blocks.py",
    "tests/integration/airflow_deployment/test_quick_start.py",
    "tests/integration/devcluster/test_process_node_recipe.py",
    "tests/unit/example_dags/test_readme.py",
    "tests/unit/test_long_description.py",
    "tests/unit/docs/test_doc_names.py",
}
DAG_ID = re.compile(r"DAG\(\s*\"(?P<id>[\w.-]+)\"")
CONTAINER = re.compile(r"container=\"(?P<name>[a-z0-9-]+)\"")


def doc_names(tag: str) -> set[str]:
    """DAG ids, Kubernetes and Kueue object names and Blob containers in the page's marked files."""
    names: set[str] = set()
    for block in marked_blocks(PAGES[tag].read_text(), tag):
        if (block.path or "").endswith(".yaml"):
            names |= {d["metadata"]["name"] for d in yaml.safe_load_all(block.body) if d}
        names |= {m["id"] for m in DAG_ID.finditer(block.body)}
        names |= {m["name"] for m in CONTAINER.finditer(block.body)}
        names |= set(re.findall(r"namespace=\"([a-z0-9-]+)\"", block.body))
        names |= set(re.findall(r"queue_name=\"([a-z0-9-]+)\"", block.body))
    return names


def suite_files() -> list[Path]:
    found = [*(REPO / "example_dags").rglob("*"), *(REPO / "tests").rglob("*")]
    return [
        p
        for p in found
        if p.suffix in (".py", ".yaml", ".yml", ".json")
        and p.is_file()
        and "__pycache__" not in p.parts
        and str(p.relative_to(REPO)) not in RUNNERS
    ]


@pytest.mark.parametrize("tag", sorted(PAGES))
def test_the_docs_names_are_used_by_no_example_or_other_test(tag: str) -> None:
    names = doc_names(tag)
    assert len(names) >= 5, names
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, sorted(names))) + r")(?![\w-])")
    clashes = {
        f"{path.relative_to(REPO)}: {m.group(1)}"
        for path in suite_files()
        for m in pattern.finditer(path.read_text(errors="replace"))
    }
    assert clashes == set(), "rename these (or the docs'): they share names with the docs on the bed"


def test_the_names_are_found() -> None:
    assert {"first_dag", "first-dag", "first-dag-cq", "first-dag-spot", "first-queue"} <= doc_names(
        "first-dag"
    )
    assert {"proc_demo", "proc-demo", "proc-demo-cq", "proc-queue"} <= doc_names("process-node")
