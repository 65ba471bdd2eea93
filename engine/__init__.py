"""weir's runtime: runs a JobGraph of keyed, stateful operators over Arrow batches.

The engine never imports sql/, planner/, shell/ or sqlglot (tests/test_layers.py).
"""
