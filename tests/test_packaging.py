"""`pip install weir` adds one top-level package, `weir`, and its command answers `--version` and
`--help` without the planner, DuckDB or sqlglot (the fresh venv here has none of them)."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("engine", "planner", "sql", "shell")


#: Not the source: virtual environments (CI's `.ci/venv`), build output, caches, benchmark data.
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "venv", "build", "*.egg-info", "__pycache__", ".hypothesis",
                                    ".pytest_cache", ".data", ".weir", "*.duckdb")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built from a copy of the source: setuptools walks the tree it builds in, and in the checkout
    other tests' processes (Ray's workers among them) write bytecode into `.ci/venv` meanwhile —
    a file listed and gone a moment later failed the build."""
    source, out = tmp_path_factory.mktemp("source") / "weir", tmp_path_factory.mktemp("wheel")
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out),
                            str(source)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    (found,) = out.glob("weir-*.whl")
    return found


def _site_packages(env: Path) -> Path:
    (found,) = env.glob("lib/python*/site-packages")
    return found


def test_the_wheel_adds_only_weir_to_a_fresh_venv(wheel, tmp_path):
    env = tmp_path / "env"
    venv.create(env, with_pip=False)
    before = {path.name for path in _site_packages(env).iterdir()}
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install", "--quiet",
                    "--no-deps", "--no-index", str(wheel)], check=True, capture_output=True)
    added = {path.name for path in _site_packages(env).iterdir()} - before
    assert {name for name in added if not name.endswith(".dist-info")} == {"weir"}

    version = subprocess.run([str(env / "bin" / "weir"), "--version"], capture_output=True, text=True)
    assert (version.returncode, version.stdout.strip()) == (0, f"weir {_version()}")
    helped = subprocess.run([str(env / "bin" / "weir"), "--help"], capture_output=True, text=True)
    assert helped.returncode == 0, helped.stderr
    assert "run a SQL file as a streaming job" in helped.stdout


def test_the_wheel_holds_every_package_of_the_repository(wheel):
    packages = {str(path.parent.relative_to(ROOT)).replace("/", ".")
                for layer in LAYERS for path in (ROOT / layer).rglob("__init__.py")}
    names = zipfile.ZipFile(wheel).namelist()
    assert {f"weir.{package}" for package in packages} <= {name.rsplit("/", 1)[0].replace("/", ".") for name in names}
    assert "weir/__init__.py" in names
    metadata = zipfile.ZipFile(wheel).read(f"weir-{_version()}.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata and "Project-URL: Source" in metadata


def test_weir_imports_use_the_weir_names():
    """`from engine...` would work from a checkout and fail once installed."""
    offenders = []
    for layer in (*LAYERS, "tests", "bench", "examples"):
        for path in (ROOT / layer).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                         else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                         else [])
                offenders += [f"{path.relative_to(ROOT)}: {name}" for name in names if name.split(".")[0] in LAYERS]
    assert offenders == []


def test_importing_weir_loads_nothing_else():
    code = "import sys, weir; print(weir.__version__, sorted(m for m in sys.modules if m.startswith('weir.')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split(" ", 1) == [_version(), "[]\n"]


def _version() -> str:
    tree = ast.parse((ROOT / "__init__.py").read_text())
    (value,) = [node.value.value for node in tree.body
                if isinstance(node, ast.Assign) and node.targets[0].id == "__version__"]
    return value
