"""The ledger append on a leg's end, with and without the outbox's bound, in one process.

Run by hand: ``.venv/bin/python bench/bench_ledger_append.py [--rows 400] [--reps 5]``.

What the outbox adds to a healthy leg end is one ``PRAGMA busy_timeout`` per transaction
(the wave's remaining bound) and, when a ledger is opened, a look for outbox files. This
times ``Ledger.append_many([row])`` on a real SQLite file both ways (``deadline=None``: the
code before; ``deadline=...``: the sink's call now), alternating, and ``Ledger()`` opens with
and without the replay look. Writes bench/results/ledger_append.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from _common import machine, offline, write_result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    offline()
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        os.environ["ORCH_HOME"] = tmp
        os.environ["ORCH_OUTBOX_DIR"] = str(Path(tmp) / "fallback")
        from orchestrator.ledger.spend import Ledger

        ledger = Ledger()
        row = {"wave_id": "w", "leg_id": "w-1", "kind": "leg", "model": "p/m", "provider": "p",
               "status": "complete", "input_tokens": 100, "output_tokens": 50,
               "cost_usd": 0.001, "cost_source": "priced"}
        samples: dict[str, list[float]] = {"before": [], "bounded": []}
        for rep in range(args.reps):
            for side in (["before", "bounded"] if rep % 2 == 0 else ["bounded", "before"]):
                t0 = time.perf_counter()
                for _ in range(args.rows):
                    if side == "before":
                        ledger.append_many([row])
                    else:
                        ledger.append_many([row], deadline=time.monotonic() + 30)
                samples[side].append((time.perf_counter() - t0) / args.rows * 1e6)
        opens: dict[str, list[float]] = {"no_replay": [], "replay_look": []}
        for rep in range(args.reps):
            for side in (["no_replay", "replay_look"] if rep % 2 == 0 else
                         ["replay_look", "no_replay"]):
                t0 = time.perf_counter()
                for _ in range(200):
                    Ledger(replay=side == "replay_look")
                opens[side].append((time.perf_counter() - t0) / 200 * 1e6)
    med = {k: statistics.median(v) for k, v in {**samples, **opens}.items()}
    ratio = med["bounded"] / med["before"]
    print(f"append one row: before {med['before']:.0f} us, with the bound {med['bounded']:.0f} us"
          f" (x{ratio:.3f})")
    print(f"open: {med['no_replay']:.0f} us, with the outbox look {med['replay_look']:.0f} us")
    write_result("ledger_append", {"machine": machine(), "rows": args.rows, "reps": args.reps,
                                   "samples_us": {**samples, **opens}, "median_us": med,
                                   "append_ratio": ratio})


if __name__ == "__main__":
    main()
