"""The layers of DESIGN.md are real: engine/ never imports the layers above it."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "engine": {"sql", "planner", "shell", "sqlglot"},
    "sql": {"planner", "engine", "shell"},
    "planner": {"shell"},
}


def _layer(module: str) -> str:
    """The layer (or outside package) a module belongs to: `weir.engine.graph` -> `engine`."""
    parts = module.split(".")
    return parts[1] if parts[0] == "weir" and len(parts) > 1 else parts[0]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(_layer(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(_layer(node.module))
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_layers_below(package):
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imports(path) & FORBIDDEN[package])
        for path in (ROOT / package).rglob("*.py")
        if _imports(path) & FORBIDDEN[package]
    }
    assert offenders == {}
    assert any((ROOT / package).rglob("*.py")), f"{package}/ has no modules"


def test_running_the_engine_loads_no_layer_above_it():
    """Transitively too: importing the executor and every connector and operator
    pulls in none of sql/, planner/, shell/ or sqlglot."""
    code = (
        "import sys, weir.engine.runtime.local, weir.engine.connectors.registry, weir.engine.operators.registry\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] == 'sqlglot' or "
        "m.startswith(('weir.sql', 'weir.planner', 'weir.shell')))))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
