"""weir's streaming SQL dialect on sqlglot: text in, normalised statements out."""
from weir.sql.errors import Problem, WeirSqlError
from weir.sql.intervals import interval_micros
from weir.sql.parser import parse
from weir.sql.statements import WindowTVF

__all__ = ["Problem", "WeirSqlError", "WindowTVF", "interval_micros", "parse"]
