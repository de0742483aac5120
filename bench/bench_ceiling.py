"""What the running-account cost ceiling costs a leg: every request claims its worst case
(an estimate of the whole request) before it is sent.

Run by hand: ``.venv/bin/python bench/bench_ceiling.py [--steps 100] [--reps 5]``.

Against the scripted server at zero latency (its own process), one leg of ``--steps``
sequential requests (``noop`` tool calls, then an answer; its history grows every step) runs
with a ceiling no request comes near (``max_cost`` $1,000,000, a priced provider) and without
one; the two alternate, and the median per-request wall and CPU time of each is reported with
their ratios. Writes bench/results/ceiling.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import tempfile
import time
from pathlib import Path

from _common import (
    PROVIDER,
    ModelNames,
    engine_setup,
    machine,
    offline,
    scripted_server,
    write_result,
    write_script,
)


def run_leg(cfg, pm, runs: Path, model: str, steps: int, ceiling: float | None) -> dict:
    import anyio

    from orchestrator.engine.ledger_sink import LedgerSink
    from orchestrator.engine.wave import Wave, WaveSpec
    from orchestrator.models.resolve import resolve_all

    resolved = resolve_all([f"{PROVIDER}/{model}"], cfg, pm)
    options = {} if ceiling is None else {"max_cost": ceiling}
    spec = WaveSpec(models=resolved, briefing="Benchmark briefing: call noop, then answer.",
                    runs_dir=runs, max_steps=steps + 1, options=options)
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    doc = anyio.run(Wave(spec, pm=pm, config=cfg, ledger=LedgerSink()).run)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    leg = doc["legs"][0]
    if leg["status"] != "complete" or leg["requests"] != steps:
        raise RuntimeError(f"leg did not make {steps} requests: {leg['status']} "
                           f"{leg['requests']} {leg['reason']}")
    return {"wall_ms": wall / steps * 1e3, "cpu_ms": cpu / steps * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    offline()
    pool = ModelNames("ceiling-", 2 * args.reps + 2)
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        tmp = Path(tmp)
        write_script(tmp / "script.json", pool.all(), args.steps)
        with scripted_server(latency_ms=0, script=tmp / "script.json") as url:
            cfg, pm = engine_setup(tmp / "home", url)
            from orchestrator import runtime
            from orchestrator.config import Config

            priced = Config.load()
            priced.providers[PROVIDER].update(input_cost_per_mtok=1.0,
                                              output_cost_per_mtok=1.0)
            priced.save()
            runtime.config.cache_clear()
            cfg = runtime.config()
            runs = tmp / "home" / "runs"
            for ceiling in (None, 1e6):  # warm-up, untimed
                run_leg(cfg, pm, runs, pool.take(1)[0], args.steps, ceiling)
            samples = {"ceiling": [], "none": []}
            for rep in range(args.reps):
                order = ["ceiling", "none"] if rep % 2 == 0 else ["none", "ceiling"]
                for side in order:
                    samples[side].append(run_leg(cfg, pm, runs, pool.take(1)[0], args.steps,
                                                 1e6 if side == "ceiling" else None))
    med = {side: {k: statistics.median(x[k] for x in xs) for k in ("wall_ms", "cpu_ms")}
           for side, xs in samples.items()}
    ratio = {k: med["ceiling"][k] / med["none"][k] for k in ("wall_ms", "cpu_ms")}
    print(f"one leg of {args.steps} requests, median of {args.reps} (CPU: this process only; "
          "the server is another process)")
    for k, label in (("wall_ms", "wall"), ("cpu_ms", "CPU")):
        print(f"  {label}: with a ceiling {med['ceiling'][k]:.2f} ms/request, without "
              f"{med['none'][k]:.2f}, ratio {ratio[k]:.3f}x")
    write_result("ceiling", {"machine": machine(), "steps": args.steps, "reps": args.reps,
                             "samples": samples, "median": med, "ratio": ratio})
    print(json.dumps({k: round(v, 3) for k, v in ratio.items()}))


if __name__ == "__main__":
    main()
