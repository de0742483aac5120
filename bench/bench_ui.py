"""``orch ui``'s heaviest pages at scale: the runs page over 10,000 waves and the spend page
(and its chart) over 100,000 ledger rows, timed through real HTTP on loopback.

Run by hand: ``.venv/bin/python bench/bench_ui.py [--waves 10000] [--rows 100000] [--reps 5]``.

The folders and rows are made here (final ``wave.json`` documents of two legs each; ledger
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
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(n):
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


def make_rows(n: int) -> None:
    from orchestrator.ledger import Ledger

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


def timed(port: int, token: str, path: str, reps: int) -> dict:
    samples, size = [], 0
    for _ in range(reps):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        t0 = time.perf_counter()
        conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}",
                                           "Cookie": f"orch_ui_{port}={token}"})
        resp = conn.getresponse()
        body = resp.read()
        samples.append((time.perf_counter() - t0) * 1000)
        assert resp.status == 200, (path, resp.status, body[:200])
        size = len(body)
        conn.close()
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
        from orchestrator.ui.server import UIServer
        from orchestrator.ui.views import View

        server = UIServer(View(runs, Path(tmp) / "bench"))
        server.start()
        pages = {"runs": "/", "runs_filtered": "/?status=error",
                 "spend": "/spend?since=all&by=model", "spend_by_user": "/spend?since=all&by=user",
                 "spend_chart": "/spend/chart.svg?since=all&by=model",
                 "spend_provider": "/spend?since=all&by=provider"}
        results = {name: timed(server.port, server.token, path, args.reps)
                   for name, path in pages.items()}
        server.shutdown()
    load = os.getloadavg()
    for name, r in results.items():
        print(f"{name:16} median {r['median_ms']:8.1f} ms  (first {r['first_ms']}, min {r['min_ms']}, "
              f"max {r['max_ms']}, {r['bytes']:,} bytes)")
    print(f"load average {load[0]:.2f}")
    write_result("ui_pages", {"waves": args.waves, "rows": args.rows, "reps": args.reps,
                              "pages": results, "loadavg": load, "machine": machine()})


if __name__ == "__main__":
    main()
