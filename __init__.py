"""weir: a streaming SQL engine for Python.

The repository's folders are its layers and install as this package's subpackages
(`pyproject.toml` maps ``weir`` to the repository root): ``weir.sql`` parses,
``weir.planner`` turns statements into a JobGraph, ``weir.engine`` runs it, and
``weir.shell`` holds the front ends: the Python API (``weir.shell.api``), the
interactive shell and the command line. Importing ``weir`` loads none of them: the
API's names below are looked up on first use (PEP 562), so ``weir --help`` stays fast.
"""

import os as _os
import sys as _sys

__version__ = "0.2.0"

# pyarrow's default allocator on Linux, mimalloc, kept ~30-50 MB more of a 10M-row job's freed
# batches resident than jemalloc (bench/README.md, issue 17); Arrow reads the choice once, when
# pyarrow is imported, so only an import of weir before pyarrow's makes it (the user's own setting wins).
if _sys.platform == "linux" and "pyarrow" not in _sys.modules:
    _os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")

#: The public names and the module that defines each, imported when first asked for.
_EXPORTS = {
    "connect": "weir.shell.api",
    "run": "weir.shell.api",
    "Connection": "weir.shell.api",
    "JobHandle": "weir.shell.api",
    "udf": "weir.engine.udfs",
    "udaf": "weir.engine.udafs",
    "udtf": "weir.engine.udtfs",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'weir' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
