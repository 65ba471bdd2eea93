"""Executors that run a JobGraph. ``LocalExecutor`` runs it in this process."""
