"""The Postgres wire endpoint (`weir serve`, `weir run --serve`): Postgres clients query
result tables and SHOW JOBS, and SUBSCRIBE to a view's changes."""
