"""The pure model's identity: who an object belongs to: the task instance's identity, the seal, ownership and
what a cache keeps of it.

No I/O, no Airflow (the layering test holds it).
"""
