"""Pure view models of the UI: no I/O, no Airflow. They turn the domain model's objects into what the pages
draw and live next to the UI, their only user (tests/unit/test_layering.py holds them to the model's rule)."""
