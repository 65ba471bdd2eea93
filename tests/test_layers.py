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


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
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
        "import sys, engine.runtime.local, engine.connectors.registry, engine.operators.registry\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('sql', 'planner', 'shell', 'sqlglot'))))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
