"""The pure model's pods: what pods may use: the pod policy's allow-lists and the references a pod may make.

No I/O, no Airflow (the layering test holds it).
"""
