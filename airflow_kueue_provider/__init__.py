"""Apache Airflow provider for Kueue-queued Kubernetes IndexedJobs."""

import os
from importlib.util import find_spec

# The [kueue] options are read from the environment as at exec (hooks/kueue_config.py), which setproctitle
# overwrites in /proc/self/environ unless SPT_NOENV is set before its first call in the process (or in the
# process it was forked from). Airflow's executor workers, supervisors and task runners all set a title.
os.environ.setdefault("SPT_NOENV", "1")

__version__ = "0.1.0"

WORKER_DIST = "airflow-kueue-provider-worker"
WORKER_PACKAGES = ("worker", "kueue", "storage")  # what the worker distribution installs (worker-package/)


class WorkerPackageMissing(ImportError):
    """The worker distribution, which owns ``worker``, ``kueue`` and ``storage``, is not installed here."""


def _require_worker_package() -> None:
    """Fail at the first import with the fix, not later with a bare ModuleNotFoundError deep in a hook."""
    missing = [name for name in WORKER_PACKAGES if find_spec(f"{__name__}.{name}") is None]
    if missing:
        packages = ", ".join(f"{__name__}.{name}" for name in missing)
        raise WorkerPackageMissing(
            f"airflow-kueue-provider {__version__} needs {WORKER_DIST} {__version__}, which installs "
            f"{packages}: pip install {WORKER_DIST}=={__version__} "
            "(from a clone of the repository: pip install ./worker-package)"
        )


_require_worker_package()
