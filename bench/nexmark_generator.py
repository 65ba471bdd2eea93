"""Benchmark: the `nexmark` source alone, reading every batch of one table in-process.

    python bench/nexmark_generator.py [--events 10000000] [--table bid]
        [--columns auction,bidder,price,date_time,extra] [--runs 3] [--baseline DIR]

Each run is a child process that makes the source (the columns a job reads,
as `Source.project` leaves them; the default is Nexmark q0/q1's) and reads all
its batches, as `weir run` would, with nothing downstream. It prints the CPU
seconds of the read (user + system, which counts page faults), the minor page
faults of the process and its peak RSS. CPU is the figure to compare on a busy
machine: the job benchmarks' wall times follow the share of a core a process gets.

With ``--baseline DIR`` each run also runs with weir from DIR (a directory holding a ``weir``
package), alternating with this tree run by run; its lines are labelled ``base``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: The child: read every batch, then print CPU seconds, faults and peak RSS as JSON.
CHILD = """
import json, resource, sys, time
import weir  # before pyarrow: weir chooses Arrow's allocator
from weir.engine.pandas_import import defer_pandas
defer_pandas()  # as the CLI does
import pyarrow as pa
from weir.engine.connectors.nexmark import COLUMNS
from weir.engine.connectors.registry import create_source
events, table, columns = int(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
source = create_source({"connector": "nexmark", "table": table, "events": str(events)},
                       pa.schema([(c, COLUMNS[table][c]) for c in columns]))
before = resource.getrusage(resource.RUSAGE_SELF)
rows = sum(batch.num_rows for batch, _ in source.read("0"))
after = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"rows": rows, "cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
                  "faults": after.ru_minflt - before.ru_minflt, "rss_mb": after.ru_maxrss / 1024,
                  "module": sys.modules["weir"].__file__}))
"""


def run(args: argparse.Namespace, env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(args.events), args.table, args.columns],
                          capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000_000, help="Nexmark events (all kinds)")
    parser.add_argument("--table", default="bid", choices=("bid", "auction", "person"))
    parser.add_argument("--columns", default="auction,bidder,price,date_time,extra")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", metavar="DIR", help="also run weir from DIR, alternating with this tree")
    args = parser.parse_args()
    # (without PYTHONDONTWRITEBYTECODE, or the cache is never written and every start compiles)
    cached = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
              "PYTHONPYCACHEPREFIX": str(HERE / ".data" / "pycache")}
    trees = {"": cached, **({"base": {**cached, "PYTHONPATH": args.baseline}} if args.baseline else {})}
    print(f"{args.events:,} events, table {args.table}, columns {args.columns}")
    print(f"{'tree':5} {'rows':>10} {'CPU s':>7} {'faults':>9} {'RSS MB':>7}  weir")
    for _ in range(args.runs):
        for label, env in trees.items():
            got = run(args, env)
            print(f"{label:5} {got['rows']:>10,} {got['cpu']:7.2f} {got['faults']:>9,} {got['rss_mb']:7.0f}  "
                  f"{Path(got['module']).parent}")


if __name__ == "__main__":
    main()
