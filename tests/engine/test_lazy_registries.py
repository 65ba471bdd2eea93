"""The connector and operator registries import a module when one of its names is looked up,
and list every name without importing any (engine/lazy_registry.py)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from weir.engine.connectors.registry import BUILT_IN, CONNECTORS
from weir.engine.lazy_registry import LazyRegistry
from weir.engine.operators.base import OperatorKind
from weir.engine.operators.registry import KINDS, OPERATORS


def test_every_entry_is_defined_where_the_registry_says():
    assert {name: CONNECTORS[name].name for name in BUILT_IN} == {name: name for name in BUILT_IN}
    assert set(OPERATORS) <= set(KINDS) and set(KINDS) - set(OPERATORS) == {"source", "sink"}
    assert all(issubclass(KINDS[kind], OperatorKind) for kind in KINDS)


def test_a_lookup_imports_only_the_module_of_that_name():
    code = """
        import sys
        from weir.engine.connectors.registry import CONNECTORS, connector_spec
        from weir.engine.operators.registry import KINDS, operator_class
        loaded = lambda: sorted(m.rsplit(".", 1)[1] for m in sys.modules
                                if m.startswith(("weir.engine.connectors.", "weir.engine.operators."))
                                and m.rsplit(".", 1)[1] in ("kafka", "filesystem", "blackhole", "nexmark", "datagen",
                                                            "calc", "top_n", "window_join", "session_window"))
        print(loaded(), len(CONNECTORS), "kafka" in CONNECTORS, len(KINDS), "calc" in KINDS)
        connector_spec("blackhole"), operator_class("calc")
        print(loaded())
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    before, after = done.stdout.splitlines()
    assert before == f"[] {len(BUILT_IN)} True {len(KINDS)} True"
    assert after == "['blackhole', 'calc']"


def test_a_registry_is_a_mapping_of_what_was_set_and_what_is_known():
    registry = LazyRegistry({"join": "os.path:join"})
    assert list(registry) == ["join"] and not registry.is_loaded("join")
    registry["mine"] = len
    assert registry["join"] is __import__("os").path.join and registry.is_loaded("join")
    assert dict(registry) == {"mine": len, "join": registry["join"]}
    del registry["join"]
    assert "join" not in registry and len(registry) == 1 and registry.get("join") is None


def test_the_fork_server_of_parallel_workers_loads_every_operator_and_nothing_above():
    """A parallel job's workers are forked from a server that imported every operator
    (engine/runtime/worker_preload.py), so that none imports them again; it loads no connector
    (a job loads its own only), neither the planner, the shell nor sqlglot, nor pandas."""
    code = """
        import sys
        import weir.engine.runtime.worker_preload
        from weir.engine.connectors.registry import BUILT_IN
        from weir.engine.operators.registry import KINDS
        print(all(KINDS.is_loaded(k) for k in KINDS))
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("sqlglot", "pandas", "confluent_kafka")
                     or m.startswith(("weir.sql", "weir.planner", "weir.shell"))
                     or m in {where.partition(":")[0] for where in BUILT_IN.values()}))
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["True", "[]"]


def test_a_lazy_module_is_imported_when_a_name_of_it_is_first_read():
    code = """
        import sys
        from weir.engine.lazy_registry import LazyModule
        colorsys = LazyModule("colorsys")
        print("colorsys" in sys.modules, repr(colorsys))
        print(colorsys.rgb_to_hsv(1, 0, 0) == (0.0, 1.0, 1), colorsys.ONE_THIRD is sys.modules["colorsys"].ONE_THIRD)
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["False LazyModule('colorsys')", "True True"]


def test_planning_a_query_loads_the_operators_it_has_and_not_the_others():
    """The planner names the operators of joins, OVER, ranking, LIMIT, Top-N, UNION, LATERAL TABLE
    and session windows through ``LazyModule``: a GROUP BY loads none of their modules."""
    code = """
        import sys
        from weir.planner.planner import plan_script
        from weir.sql import parse
        plan_script(parse(
            "CREATE TABLE bids (auction BIGINT, price BIGINT) WITH ('connector' = 'nexmark', 'events' = '10');"
            "CREATE TABLE out (auction BIGINT, n BIGINT) WITH ('connector' = 'blackhole');"
            "INSERT INTO out SELECT auction, COUNT(*) FROM bids GROUP BY auction;"), db_path=":memory:")
        print(sorted(m.rsplit(".", 1)[1] for m in sys.modules if m.startswith("weir.engine.operators.")
                     and m.rsplit(".", 1)[1] in ("stream_join", "interval_join", "window_join", "lookup_join",
                                                 "temporal_join", "over_aggregate", "window_rank", "limit", "top_n",
                                                 "union", "table_function", "session_window", "group_aggregate")))
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['group_aggregate']"]
