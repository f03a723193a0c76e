"""Apache Airflow provider for Kueue-queued Kubernetes IndexedJobs."""

__version__ = "0.1.0"
