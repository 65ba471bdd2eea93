"""weir: a streaming SQL engine for Python.

The repository's folders are its layers and install as this package's subpackages
(`pyproject.toml` maps ``weir`` to the repository root): ``weir.sql`` parses,
``weir.planner`` turns statements into a JobGraph, ``weir.engine`` runs it, and
``weir.shell`` is the command line. Importing ``weir`` loads none of them.
"""

__version__ = "0.2.0"
