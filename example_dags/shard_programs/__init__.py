"""Real, small shard programs on the worker SDK, run as a pod's command on the bed's process nodes.

``python -m example_dags.shard_programs.aligner`` aligns synthetic reads of one chromosome shard to a
synthetic reference; ``python -m example_dags.shard_programs.monte_carlo_pricer`` prices Heston paths of one
shard. Both share ``shard_loop`` (resume, record each item once, checkpoint every K items and on SIGTERM,
mark done with a deterministic output), so a test can prove exactly-once from the items log and the
outputs. Not DAG files: ``example_dags/.airflowignore`` keeps the DAG processor out of this folder.
"""
