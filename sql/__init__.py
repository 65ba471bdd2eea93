"""weir's streaming SQL dialect on sqlglot: text in, normalised statements out."""
