"""Ledger append latency and throughput: SQLite against PostgreSQL, one writer and 8 writers.

Run by hand: ``.venv/bin/python bench/bench_ledger_backends.py [--rows 300] [--reps 3]``.

Each append is what a leg's end costs the ledger: ``Ledger.append_many([row], deadline=...)``,
one row, one transaction, as the wave's sink calls it. The SQLite ledger is a file in a
temporary directory (WAL, synchronous=NORMAL, as orch opens it); PostgreSQL is a throwaway
local server with its default durability (fsync on, synchronous_commit on), started by
orchestrator.testing.postgres. 8 writers are 8 processes released together; throughput is
all their rows over the wall time from release to the last row. The baseline is SQLite with
one writer, measured in the same run. Writes bench/results/ledger_backends.json.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import time
from pathlib import Path

from _common import machine, offline, write_result


def _row(writer: int, n: int) -> dict:
    return {"wave_id": f"w{writer}", "leg_id": f"{writer}-{n}", "kind": "leg", "model": "p/m",
            "provider": "p", "status": "complete", "input_tokens": 1200,
            "output_tokens": 300, "cost_usd": 0.0123, "cost_source": "priced"}


def _writer(url: str, writer: int, rows: int, ready, start, out) -> None:
    from orchestrator.ledger.spend import Ledger

    ledger = Ledger(url, replay=False)
    ledger.append_many([_row(writer, -1)])  # connected and warm before the clock starts
    ready.put(writer)
    start.wait()
    latencies = []
    for n in range(rows):
        t0 = time.perf_counter()
        ledger.append_many([_row(writer, n)], deadline=time.monotonic() + 30)
        latencies.append(time.perf_counter() - t0)
    out.put((latencies, time.perf_counter()))


def run(url: str, writers: int, rows: int) -> dict:
    ctx = multiprocessing.get_context("spawn")
    ready, start, out = ctx.Queue(), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(url, w, rows, ready, start, out))
             for w in range(writers)]
    for p in procs:
        p.start()
    for _ in procs:  # every writer imported, connected and warm
        ready.get(timeout=300)
    t0 = time.perf_counter()
    start.set()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    latencies = [x for lat, _ in results for x in lat]
    wall = max(end for _, end in results) - t0
    latencies.sort()
    return {"writers": writers, "rows": writers * rows, "wall_s": wall,
            "rows_per_s": writers * rows / wall,
            "median_ms": statistics.median(latencies) * 1000,
            "p95_ms": latencies[int(len(latencies) * 0.95)] * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300, help="rows per writer")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    offline()
    from orchestrator.testing.postgres import Cluster

    cluster = Cluster(durable=True)
    results: dict[str, list[dict]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
            os.environ["ORCH_HOME"] = tmp
            os.environ["ORCH_OUTBOX_DIR"] = str(Path(tmp) / "fallback")
            for rep in range(args.reps):
                sides = [("sqlite", 1), ("postgresql", 1), ("sqlite", 8), ("postgresql", 8)]
                for backend, writers in (sides if rep % 2 == 0 else sides[::-1]):
                    url = (f"sqlite:///{tmp}/ledger-{rep}-{writers}.db" if backend == "sqlite"
                           else cluster.new_database())
                    got = run(url, writers, args.rows)
                    results.setdefault(f"{backend}x{writers}", []).append(got)
                    print(f"rep {rep} {backend:10} {writers} writer(s): "
                          f"{got['rows_per_s']:7.0f} rows/s, median {got['median_ms']:.2f} ms, "
                          f"p95 {got['p95_ms']:.2f} ms")
    finally:
        cluster.close()
    summary = {}
    base = statistics.median(r["rows_per_s"] for r in results["sqlitex1"])
    base_lat = statistics.median(r["median_ms"] for r in results["sqlitex1"])
    for key, runs in results.items():
        rate = statistics.median(r["rows_per_s"] for r in runs)
        lat = statistics.median(r["median_ms"] for r in runs)
        p95 = statistics.median(r["p95_ms"] for r in runs)
        summary[key] = {"rows_per_s": rate, "median_ms": lat, "p95_ms": p95,
                        "throughput_vs_sqlite_1": rate / base,
                        "latency_vs_sqlite_1": lat / base_lat}
        print(f"{key:13} {rate:7.0f} rows/s (x{rate / base:.2f}), median {lat:.2f} ms "
              f"(x{lat / base_lat:.2f}), p95 {p95:.2f} ms")
    write_result("ledger_backends", {"machine": machine(), "rows_per_writer": args.rows,
                                     "reps": args.reps, "runs": results, "summary": summary})


if __name__ == "__main__":
    main()
