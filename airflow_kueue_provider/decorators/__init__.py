"""TaskFlow decorators: ``@task.kueue`` (``kueue_task``)."""
