"""README.md and the docs say what the code does: "Your first DAG" is complete and consistent (and the same in
README.md and docs/first-dag.md), the parameter table (docs/parameters.md) marks exactly the operators'
``template_fields``, its import lines import, and every Blob connection id is the default one.
(``tests/integration/examples/test_first_dag.py`` runs the README's first DAG on the local cluster.)"""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import yaml
from airflow.sdk import DAG

from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob
from airflow_kueue_provider.storage.blob_store_base import DEFAULT_CONN_ID
from tests.integration.examples.readme_blocks import marked_blocks

REPO = Path(__file__).resolve().parents[3]
README = (REPO / "README.md").read_text()
DOCS = REPO / "docs"
PARAMETERS = (DOCS / "parameters.md").read_text()


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    return README[start : README.index("\n## ", start + 1)]


def test_the_docs_first_dag_is_the_readme_s() -> None:
    """docs/first-dag.md has the README's blocks, byte for byte (the integration test runs the README's)."""
    readme_blocks = marked_blocks(section("Your first DAG"), "first-dag")
    assert len(readme_blocks) == 4
    assert marked_blocks((DOCS / "first-dag.md").read_text(), "first-dag") == readme_blocks


def test_first_dag_blocks_fit_together(tmp_path: Path) -> None:
    blocks = marked_blocks(section("Your first DAG"), "first-dag")
    files = {b.path: b.body for b in blocks if b.kind == "file"}
    shell = "\n".join(b.body for b in blocks if b.kind == "shell")
    queues_path, dag_path = sorted(files, key=lambda p: p.endswith(".py"))
    assert f"kubectl apply --server-side -f {queues_path}" in shell

    docs = {d["kind"]: d for d in yaml.safe_load_all(files[queues_path]) if d}
    assert set(docs) == {"Namespace", "ResourceFlavor", "ClusterQueue", "LocalQueue"}
    group = docs["ClusterQueue"]["spec"]["resourceGroups"][0]
    assert set(group["coveredResources"]) == {"cpu", "memory"}
    assert group["flavors"][0]["name"] == docs["ResourceFlavor"]["metadata"]["name"]
    assert docs["LocalQueue"]["spec"]["clusterQueue"] == docs["ClusterQueue"]["metadata"]["name"]

    (tmp_path / "first_dag.py").write_text(files[dag_path])
    dag = next(v for v in runpy.run_path(str(tmp_path / "first_dag.py")).values() if isinstance(v, DAG))
    assert dag_path.endswith(f"/{dag.dag_id}.py") and f"airflow dags test {dag.dag_id}" in shell
    shards = next(t for t in dag.tasks if isinstance(t, KueueIndexedJobOperator))
    assert (shards.namespace, shards.queue_name) == (
        docs["LocalQueue"]["metadata"]["namespace"],
        docs["LocalQueue"]["metadata"]["name"],
    )
    assert isinstance(shards.checkpointing, Checkpointing) and shards.checkpointing.conn_id == DEFAULT_CONN_ID
    assert any(k.startswith("kwok.airflow-kueue.io/") for k in shards.annotations or {})
    assert [t.task_id for t in dag.tasks if shards.task_id in t.upstream_task_ids] == ["report"]
    assert f"export AIRFLOW_CONN_{DEFAULT_CONN_ID.upper()}=" in shell
    assert "export AIRFLOW_CONN_KUBERNETES_DEFAULT=" in shell and "$KUBECONFIG" in shell
    assert "$AZURE_STORAGE_CONNECTION_STRING" in shell and "source .devcluster/env" in shell


def _table_rows(text: str) -> list[str]:
    start = text.index("| parameter | meaning | default |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append(line.split(" | ")[0].lstrip("| "))
    return rows


def marked_templated(cell: str) -> set[str]:
    """The parameters a first cell marks *T*: each name followed by it, or every name before "all/both *T*"
    (an alias in parentheses, ``(or env_vars)``, is the same parameter)."""
    if re.search(r"(all|both) \*T\*", cell):
        return set(re.findall(r"`(\w+)`", re.sub(r"\(or `\w+`\)", "", cell)))
    return set(re.findall(r"`(\w+)` \*T\*", cell))


def test_parameter_table_marks_the_templated_fields() -> None:
    marked: set[str] = set()
    for cell in _table_rows(PARAMETERS):
        marked |= marked_templated(cell)
    # the pods' resources live in job_resources (BaseOperator.resources means executor resources)
    parameter_of = {"job_resources": "resources"}
    assert marked == {parameter_of.get(f, f) for f in KueueIndexedJobOperator.template_fields}


def test_jobset_templated_fields_are_named() -> None:
    found = re.search(
        r"`KueueJobSetOperator` templates (.*?),\s+in which each `KueueReplicatedJob`'s\s+(.*?)\.",
        PARAMETERS,
        re.S,
    )
    assert found, "the sentence after the parameter table"
    assert set(re.findall(r"`(\w+)`", found.group(1))) == set(KueueJobSetOperator.template_fields)
    assert set(re.findall(r"`(\w+)`", found.group(2))) == set(KueueReplicatedJob.template_fields)


def test_the_parameter_types_import_lines_import() -> None:
    block = re.search(r"The parameters' own types come\s+from:\n\n```python\n(.*?)```", PARAMETERS, re.S)
    assert block
    names: dict[str, object] = {}
    exec(block.group(1), names)  # the page's own import lines
    for name in ("Checkpointing", "DeadlineEscalation", "ParallelismRamp", "TopologyRequest", "VmPrice"):
        assert name in names, name


def test_one_blob_connection_id_everywhere() -> None:
    """``kueue_blob_default`` (the hooks' default) is the only Blob connection id the docs, examples and code
    name as a default or an example."""
    assert DEFAULT_CONN_ID == "kueue_blob_default"
    paths = [REPO / "README.md", *(REPO / "example_dags").rglob("*.py"), *(REPO / "tools").glob("*.py")]
    paths += list((REPO / "airflow_kueue_provider").rglob("*.py")) + list((REPO / "docs").rglob("*.md"))
    other = re.compile(r"(?<![\w-])(?!kueue_blob_default\b)\w*blob_default\b")
    found = {str(p.relative_to(REPO)): other.findall(p.read_text()) for p in paths}
    assert {p: ids for p, ids in found.items() if ids} == {}


def test_fake_pod_indexes_are_job_indexes_not_shard_ids() -> None:
    bed = (DOCS / "bed.md").read_text()
    fake_pods = bed[bed.index("\n## Fake pods\n") :]
    fake_pods = fake_pods[: fake_pods.find("\n## ", 1) if "\n## " in fake_pods[1:] else None]
    assert "not shard ids" in fake_pods and "AIRFLOW_KUEUE_SHARDS" in fake_pods
