"""The worker wheel's contents: ``airflow_kueue_provider/<package>`` for each package the hook's config names,
copied in from the repository's tree. Not for an editable install (``make venv``), which is metadata only:
copies there would be stale shadows of the tree that the provider's editable install serves (hatchling puts
pyproject's force-include into editable wheels too, hence a hook)."""

from __future__ import annotations

from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class WorkerPackagesHook(BuildHookInterface):  # type: ignore[misc]  # hatchling: the build env only
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            return
        for package in self.config["packages"]:
            target = f"airflow_kueue_provider/{package}"
            build_data["force_include"][f"../{target}"] = target
