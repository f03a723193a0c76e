"""Apache Airflow provider for Kueue-queued Kubernetes IndexedJobs."""

import os

# The [kueue] options are read from the environment as at exec (hooks/kueue_config.py), which setproctitle
# overwrites in /proc/self/environ unless SPT_NOENV is set before its first call in the process (or in the
# process it was forked from). Airflow's executor workers, supervisors and task runners all set a title.
os.environ.setdefault("SPT_NOENV", "1")

__version__ = "0.1.0"
