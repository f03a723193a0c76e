"""The pure model's figures: what a run cost and took: attempt figures, prices, metric points.

No I/O, no Airflow (the layering test holds it).
"""
