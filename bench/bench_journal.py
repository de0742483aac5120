"""The request journal: what writing every request down (fsync'd) before it is sent costs.

Run by hand: ``.venv/bin/python bench/bench_journal.py [--n 16] [--reps 5] [--appends 400]``.

Two measures, each against a baseline taken in the same run:

- one append: ``WaveJournal.sent`` (one ``write`` + ``fdatasync`` on the wave's open file)
  against the in-flight ledger row each answer already writes (``Ledger.append_many`` on a
  SQLite file with the wave's deadline), alternating, median per call;
- the whole wave: an N-leg, 3-step wave against the scripted server (its own process, 0 ms
  latency: the worst case for any per-request cost) with the journal as it is, against the
  same wave with ``WaveJournal.sent`` a no-op; sides alternated, median wall.

Writes bench/results/journal.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from _common import (
    ModelNames,
    engine_setup,
    machine,
    offline,
    scripted_server,
    write_result,
    write_script,
)
from bench_wave import STEPS, run_engine, timed


def appends(home: Path, count: int, reps: int) -> dict[str, float]:
    from orchestrator.account.journal import WaveJournal
    from orchestrator.ledger.connection import default_url
    from orchestrator.ledger.spend import Ledger

    ledger = Ledger()
    row = {"wave_id": "w", "leg_id": "w-1", "kind": "leg", "model": "p/m", "provider": "p",
           "status": "aborted", "reason": "in flight", "input_tokens": 100,
           "output_tokens": 50, "cost_usd": 0.001, "cost_source": "priced", "seq": 0}
    journal = WaveJournal(default_url(), "bench-journal", None)
    samples: dict[str, list[float]] = {"journal": [], "ledger_row": []}
    seq = 0
    for rep in range(reps):
        for side in (["journal", "ledger_row"] if rep % 2 == 0 else ["ledger_row", "journal"]):
            t0 = time.perf_counter()
            for n in range(count):
                if side == "journal":
                    journal.sent("bench-journal-1", n + 1, "p/m", 0.01)
                else:
                    seq += 1
                    ledger.append_many([{**row, "seq": seq}],
                                       deadline=time.monotonic() + 30)
            samples[side].append((time.perf_counter() - t0) / count * 1e6)
    journal.close()
    return {side: statistics.median(v) for side, v in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16, help="legs")
    parser.add_argument("--reps", type=int, default=5, help="timed runs per side")
    parser.add_argument("--appends", type=int, default=400)
    args = parser.parse_args()
    offline()
    from orchestrator.account import journal as journal_mod

    sent = journal_mod.WaveJournal.sent

    def no_journal(self, *a, **k) -> None:
        return None

    names = ModelNames("j", 2 + args.n * (2 * args.reps + 1))
    walls: dict[str, list[float]] = {"journal": [], "no_journal": []}
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        tmp = Path(tmp)
        os.environ["ORCH_OUTBOX_DIR"] = str(tmp / "fallback")
        script = write_script(tmp / "script.json", names.all(), STEPS)
        with scripted_server(latency_ms=0, script=script) as url:
            cfg, pm = engine_setup(tmp / "home", url, max_concurrent=args.n)
            per_append = appends(tmp / "home", args.appends, args.reps)
            runs = tmp / "home" / "runs"
            run_engine(cfg, pm, runs, names.take(1))  # warm-up

            def engine(journal: bool):
                journal_mod.WaveJournal.sent = sent if journal else no_journal
                try:
                    run_engine(cfg, pm, runs, names.take(args.n))
                finally:
                    journal_mod.WaveJournal.sent = sent

            sides = [("journal", lambda: engine(True)), ("no_journal", lambda: engine(False))]
            for rep in range(args.reps):
                for side, fn in (sides if rep % 2 == 0 else sides[::-1]):
                    walls[side].append(timed(fn)[0])
    medians = {side: statistics.median(v) for side, v in walls.items()}
    result = {
        "n": args.n, "steps": STEPS, "reps": args.reps, "appends": args.appends,
        "append_us": per_append,
        "journal_vs_ledger_row": per_append["journal"] / per_append["ledger_row"],
        "walls_s": walls, "median_s": medians,
        "journal_vs_none": medians["journal"] / medians["no_journal"],
        "load": os.getloadavg()[0], "machine": machine(),
    }
    path = write_result("journal", result)
    print(f"one append: journal {per_append['journal']:.0f} us, in-flight ledger row "
          f"{per_append['ledger_row']:.0f} us (x{result['journal_vs_ledger_row']:.2f})")
    print(f"N={args.n} x {STEPS} steps, 0 ms, {args.reps} runs per side (median): journal "
          f"{medians['journal']:.2f} s, none {medians['no_journal']:.2f} s "
          f"(x{result['journal_vs_none']:.3f}) -> {path}")


if __name__ == "__main__":
    main()
