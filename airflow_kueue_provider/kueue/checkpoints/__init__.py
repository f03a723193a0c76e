"""The pure model's checkpoints: shards and their checkpoints: the ledger, the shard containers' access,
packing, retention.

No I/O, no Airflow (the layering test holds it).
"""
