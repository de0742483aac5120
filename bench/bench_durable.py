"""The per-request durable ledger row: a 64-leg, 3-step wave with it against the same wave
writing the leg's row only at its end (as before), and against the bare gather.

Run by hand: ``.venv/bin/python bench/bench_durable.py [--n 64] [--reps 5]``.

The scripted server runs as its own process at 1,000 ms latency (``bench_wave.py``'s set-up:
every model answers with a ``noop`` tool call twice, then text). Three sides, alternated so
background load hits them alike, median reported:

- durable: the engine as it is — after each billed answer the leg's row is written (in
  flight) before anything else happens, then moved forward at the leg's end;
- end only: the same wave with the in-flight writes switched off (``Leg._ledger_row`` with
  ``in_flight=True`` returns at once): one row per leg at its end, as before;
- bare: N chains of 3 sequential ``litellm.acompletion`` calls in one ``asyncio.gather``.

Writes bench/results/durable.json.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
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
from bench_wave import STEPS, run_bare, run_engine, timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64, help="legs")
    parser.add_argument("--reps", type=int, default=5, help="timed runs per side")
    parser.add_argument("--latency-ms", type=float, default=1000.0)
    args = parser.parse_args()
    offline()
    from orchestrator.engine import leg as leg_mod

    durable_write = leg_mod.Leg._ledger_row

    async def end_only(self, *, in_flight: bool = False) -> None:
        if not in_flight:
            await durable_write(self)

    names = ModelNames("d", 2 + args.n * 3 * (args.reps + 1))
    walls: dict[str, list[float]] = {"durable": [], "end_only": [], "bare": []}
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        tmp = Path(tmp)
        script = write_script(tmp / "script.json", names.all(), STEPS)
        with scripted_server(latency_ms=args.latency_ms, script=script) as url:
            cfg, pm = engine_setup(tmp / "home", url, max_concurrent=args.n)
            from orchestrator.ledger.spend import Ledger
            from orchestrator.runtime import litellm

            lm = litellm()
            runs = tmp / "home" / "runs"
            run_engine(cfg, pm, runs, names.take(1))  # warm-up: HTTP session, ledger open
            run_bare(lm, url, names.take(1))

            def engine(durable: bool):
                leg_mod.Leg._ledger_row = durable_write if durable else end_only
                try:
                    run_engine(cfg, pm, runs, names.take(args.n))
                finally:
                    leg_mod.Leg._ledger_row = durable_write

            sides = [("durable", lambda: engine(True)), ("end_only", lambda: engine(False)),
                     ("bare", lambda: run_bare(lm, url, names.take(args.n)))]
            for rep in range(args.reps):
                for side, fn in (sides if rep % 2 == 0 else sides[::-1]):
                    walls[side].append(timed(fn)[0])
            rows = Ledger().rows()
    medians = {side: statistics.median(v) for side, v in walls.items()}
    result = {
        "n": args.n, "steps": STEPS, "latency_ms": args.latency_ms, "reps": args.reps,
        "walls_s": walls, "median_s": medians,
        "durable_vs_end_only": medians["durable"] / medians["end_only"],
        "durable_vs_bare": medians["durable"] / medians["bare"],
        "end_only_vs_bare": medians["end_only"] / medians["bare"],
        "ledger_rows": len(rows), "machine": machine(),
    }
    path = write_result("durable", result)
    print(f"N={args.n} x {STEPS} steps, {args.latency_ms:g} ms, {args.reps} runs per side "
          f"(median): durable {medians['durable']:.2f} s, end only "
          f"{medians['end_only']:.2f} s, bare {medians['bare']:.2f} s")
    print(f"durable / end only {result['durable_vs_end_only']:.3f}x, durable / bare "
          f"{result['durable_vs_bare']:.3f}x, end only / bare {result['end_only_vs_bare']:.3f}x"
          f" -> {path}")


if __name__ == "__main__":
    main()
