"""The pure domain model of the provider: index sets, Workload state, the IndexedJob manifest, results.

Nothing in this package does I/O or imports Airflow or a Kubernetes client: every function takes plain
dicts/values and returns plain values, so hooks, triggers and operators can share it and tests stay fast.
"""
