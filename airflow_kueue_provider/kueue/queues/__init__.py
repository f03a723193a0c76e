"""The pure model's queues: Kueue's queues as the provider declares them.

No I/O, no Airflow (the layering test holds it).
"""
