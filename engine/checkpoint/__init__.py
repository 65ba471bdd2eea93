"""Checkpoint storage: durable snapshots of operator state, verified when read back."""
