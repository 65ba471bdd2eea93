"""The connectors belong to the engine: they never import sql/, planner/, shell/ or sqlglot."""
import subprocess
import sys


def test_connectors_import_no_upper_layer():
    code = (
        "import sys, engine.connectors.registry\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('sql', 'planner', 'shell', 'sqlglot'))\n"
        "print(','.join(bad))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
