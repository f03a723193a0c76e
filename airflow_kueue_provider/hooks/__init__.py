"""Every call to Kubernetes (and, later, Blob Storage) lives in this package."""
