"""The Airflow UI: a queue dashboard, and per task instance an index grid and an admission timeline."""
