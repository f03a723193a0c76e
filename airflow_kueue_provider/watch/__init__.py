"""The shared list+watch hub: one watch per (connection, namespace) that triggers and the UI follow."""
