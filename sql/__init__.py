"""weir's streaming SQL dialect on sqlglot: text in, normalised statements out."""
from sql.errors import Problem, WeirSqlError
from sql.intervals import interval_micros, parse_duration
from sql.parser import parse
from sql.statements import WindowTVF

__all__ = ["Problem", "WeirSqlError", "WindowTVF", "interval_micros", "parse", "parse_duration"]
