"""The fault soak: the real deployment runs DAGs while a seeded injector kills components; independent
witnesses record what happened (``history``) and pure checks prove the invariants (``checker``).
See docs/fault-soak.md."""
