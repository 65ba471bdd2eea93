"""weir's planner: catalog, binding, streaming semantics, lowering to a JobGraph."""
