"""Run a command inside a memory cgroup of its own, where the machine allows one.

The cgroup is made under this process's own memory cgroup (v1 ``memory`` or v2
with the memory controller), so the limit applies below whatever limits the
caller already has, and it is removed when the command has ended.
"""
from __future__ import annotations

import os
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path("/sys/fs/cgroup")


def _own_cgroup() -> tuple[Path, str, str] | None:
    """(directory of this process's memory cgroup, limit file, usage-peak file), or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return ROOT / "memory" / path.lstrip("/"), "memory.limit_in_bytes", "memory.max_usage_in_bytes"
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "" and (ROOT / "cgroup.controllers").exists():
            here = ROOT / path.lstrip("/")
            if "memory" in (here / "cgroup.subtree_control").read_text().split():
                return here, "memory.max", "memory.peak"
    return None


def unavailable_reason() -> str | None:
    """Why a memory cgroup cannot be made here, or None when it can."""
    if os.geteuid() != 0:
        return "making a memory cgroup needs root"
    own = _own_cgroup()
    if own is None:
        return "no cgroup v1 memory hierarchy, and no cgroup v2 with the memory controller delegated"
    directory, limit, _ = own
    probe = directory / f"weir-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError as error:
        return f"cannot create a cgroup under {directory}: {error}"
    try:
        if not (probe / limit).exists():
            return f"{probe} has no {limit}"
    finally:
        probe.rmdir()
    return None


@contextmanager
def memory_cgroup(limit_bytes: int) -> Iterator[Path]:
    """A fresh cgroup limited to ``limit_bytes`` (swap included where the kernel counts it)."""
    own = _own_cgroup()
    if own is None:
        raise RuntimeError(unavailable_reason())
    directory, limit, _ = own
    cgroup = directory / f"weir-{os.getpid()}-{time.monotonic_ns()}"
    cgroup.mkdir()
    try:
        (cgroup / limit).write_text(str(limit_bytes))
        swap = cgroup / ("memory.memsw.limit_in_bytes" if limit.endswith("in_bytes") else "memory.swap.max")
        if swap.exists():
            try:
                swap.write_text(str(limit_bytes) if swap.name.startswith("memory.memsw") else "0")
            except OSError:
                pass  # swap accounting off: there is no swap to escape to anyway
        yield cgroup
    finally:
        try:
            cgroup.rmdir()  # empty once the command has been waited for
        except OSError:
            pass


def peak_usage(cgroup: Path) -> int | None:
    """The cgroup's peak memory use (bytes), where the kernel reports it."""
    for name in ("memory.max_usage_in_bytes", "memory.peak"):
        try:
            return int((cgroup / name).read_text())
        except (OSError, ValueError):
            continue
    return None


def entering(cgroup: Path):
    """A ``preexec_fn`` that moves the new process (and every child it starts) into ``cgroup``."""
    procs = str(cgroup / "cgroup.procs")

    def enter() -> None:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    return enter


def run_in(cgroup: Path, command: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run ``command`` with its process (and every child it starts) in ``cgroup``."""
    return subprocess.run(command, preexec_fn=entering(cgroup), **kwargs)
