"""The pure model's spec: what a Job is built from and checked by: the operator's inputs, templates,
manifests and their checks.

No I/O, no Airflow (the layering test holds it).
"""
