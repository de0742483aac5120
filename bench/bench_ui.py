"""``orch ui``'s heaviest pages at scale: the runs page over 10,000 waves and the spend page
(and its chart) over 100,000 ledger rows, timed through real HTTP on loopback.

The runs page is timed against a baseline measured in the same run, reading every run's record
once (``runs.entries``, what its first request paid before the summaries): its first request
with no summaries yet, the first request of a new process (a new view finding the summaries in
the cache folder), warm requests, the request after a new run lands, and the filters.

Run by hand: ``.venv/bin/python bench/bench_ui.py [--waves 10000] [--rows 100000] [--reps 5]``.

The folders and rows are made here (final ``wave.json`` documents of two legs each, each leg's folder beside it; ledger
rows over 60 days, 10 models, 4 users); the server is ``orch ui``'s own (UIServer + View) in
this process, so the time is the server's plus one loopback round trip. Writes
bench/results/ui_pages.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _common import machine, offline, write_result


def make_waves(runs: Path, n: int) -> None:
    make_waves_at(runs, 0, n)


def make_waves_at(runs: Path, first: int, n: int) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(first, first + n):
        wave_id = f"2026{i:08d}-w"
        folder = runs / wave_id
        folder.mkdir(parents=True)
        legs = [{"leg_id": f"{wave_id}-{k}", "wave_id": wave_id, "kind": "leg",
                 "model": f"p/m{k}", "provider": "p", "status": "complete", "answer": "ok",
                 "usage": {"input_tokens": 100, "output_tokens": 10}, "cost_usd": 0.001,
                 "duration_s": 1.0} for k in (1, 2)]
        doc = {"wave_id": wave_id, "status": "complete", "exit_code": 0, "legs": legs,
               "chair": None, "usage": {"input_tokens": 200, "output_tokens": 20},
               "cost_usd": 0.002, "cost_exact": True,
               "created_at": (start + timedelta(minutes=i)).isoformat()}
        (folder / "wave.json").write_text(json.dumps(doc))
        for leg in legs:  # each leg's own folder, as a real wave leaves them
            (runs / leg["leg_id"]).mkdir()
            (runs / leg["leg_id"] / "metadata.json").write_text(json.dumps(leg))


def make_rows(n: int) -> None:
    from orchestrator.ledger.spend import Ledger

    ledger = Ledger()
    now = datetime.now(UTC)
    batch = []
    for i in range(n):
        batch.append({"wave_id": f"w{i // 4}", "leg_id": f"w{i // 4}-{i % 4}", "kind": "leg",
                      "model": f"prov{i % 3}/m{i % 10}", "provider": f"prov{i % 3}",
                      "status": "complete" if i % 17 else "error", "input_tokens": 100,
                      "output_tokens": 10, "cost_usd": 0.0001 * (i % 7),
                      "cost_source": "priced", "user": f"u{i % 4}",
                      "ts": now - timedelta(minutes=(i * 60 * 24 * 60) // n)})
        if len(batch) == 5000:
            ledger.append_many(batch)
            batch = []
    if batch:
        ledger.append_many(batch)


def once(port: int, token: str, path: str) -> tuple[float, int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    t0 = time.perf_counter()
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}",
                                       "Cookie": f"orch_ui_{port}={token}"})
    resp = conn.getresponse()
    body = resp.read()
    ms = (time.perf_counter() - t0) * 1000
    assert resp.status == 200, (path, resp.status, body[:200])
    conn.close()
    return ms, len(body)


def timed(port: int, token: str, path: str, reps: int) -> dict:
    samples, size = [], 0
    for _ in range(reps):
        ms, size = once(port, token, path)
        samples.append(ms)
    return {"first_ms": round(samples[0], 1),  # the runs page's first visit reads every run
            "median_ms": round(statistics.median(samples), 1),
            "min_ms": round(min(samples), 1), "max_ms": round(max(samples), 1), "bytes": size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waves", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    offline()
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        os.environ["ORCH_HOME"] = tmp
        os.environ["ORCH_OUTBOX_DIR"] = str(Path(tmp) / "fallback")
        runs = Path(tmp) / "runs"
        make_waves(runs, args.waves)
        make_rows(args.rows)
        from orchestrator.operations import runs as runs_mod
        from orchestrator.ui.server import UIServer
        from orchestrator.ui.views import View

        cache, bench = Path(tmp) / "cache", Path(tmp) / "bench"
        runs_page = {}
        # the baseline, in this run: reading every run's record once (runs.entries, what
        # `orch runs` does), which is what the runs page's first request paid before the index
        t0 = time.perf_counter()
        listed = len(list(runs_mod.entries(runs, bench)))
        runs_page["read_every_record_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        assert listed == args.waves, listed
        for case in ("no summaries yet", "a new process", "a new process, again"):
            server = UIServer(View(runs, bench, cache))  # a fresh view: nothing in memory
            server.start()
            ms, size = once(server.port, server.token, "/")
            runs_page[case] = {"first_ms": round(ms, 1), "bytes": size,
                               "records_read": server.router.index.read}
            if case == "a new process, again":
                runs_page["warm"] = timed(server.port, server.token, "/", args.reps)
                make_waves_at(runs, args.waves, 1)
                ms, _ = once(server.port, server.token, "/")
                runs_page["after a new run"] = {"ms": round(ms, 1),
                                                "records_read": server.router.index.read}
                for name, path in (("status=error", "/?status=error"),
                                   ("kind=deliberation", "/?kind=deliberation"),
                                   ("since=2026-01-05", "/?since=2026-01-05"),
                                   ("page 40", "/?page=40")):
                    runs_page[name] = timed(server.port, server.token, path, args.reps)
                break
            server.router.index.flush()
            server.shutdown()
            server.server_close()
        pages = {"runs": "/", "runs_filtered": "/?status=error",
                 "spend": "/spend?since=all&by=model", "spend_by_user": "/spend?since=all&by=user",
                 "spend_chart": "/spend/chart.svg?since=all&by=model",
                 "spend_provider": "/spend?since=all&by=provider"}
        results = {name: timed(server.port, server.token, path, args.reps)
                   for name, path in pages.items()}
        server.shutdown()
    load = os.getloadavg()
    base = runs_page["read_every_record_ms"]
    print(f"runs page, {args.waves:,} waves: reading every record (the baseline) {base} ms")
    for name, r in runs_page.items():
        if isinstance(r, dict):
            ms = r.get("first_ms", r.get("ms", r.get("median_ms")))
            print(f"  {name:24} {ms:8.1f} ms  ({ms / base:.3f}x the baseline) {r}")
    for name, r in results.items():
        print(f"{name:16} median {r['median_ms']:8.1f} ms  (first {r['first_ms']}, min {r['min_ms']}, "
              f"max {r['max_ms']}, {r['bytes']:,} bytes)")
    print(f"load average {load[0]:.2f}")
    write_result("ui_pages", {"waves": args.waves, "rows": args.rows, "reps": args.reps,
                              "pages": results, "runs_page": runs_page, "loadavg": load, "machine": machine()})


if __name__ == "__main__":
    main()
