"""The Arrow Flight SQL endpoint (`weir serve --flight`): query results as Arrow columns."""
