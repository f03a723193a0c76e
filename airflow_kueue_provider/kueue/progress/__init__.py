"""The pure model's progress: how a followed object is doing: Workload states, quota, the queue, ETA,
deadlines, the event, the result.

No I/O, no Airflow (the layering test holds it).
"""
