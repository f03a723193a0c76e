"""Azure Blob Storage for checkpoints and ledgers, with no Airflow in it: the worker SDK's storage, and what
the hooks (``hooks.blob_store``: credentials from an Airflow connection) build on."""
