"""The leg loop's own overhead per request, against a bare litellm.acompletion loop.

Run by hand: ``.venv/bin/python bench/bench_leg_overhead.py [--shapes 1x200,20x10]``.

Against the scripted server at zero latency (its own process), each shape ``LxS`` makes L×S
sequential requests each way:

- engine: L one-leg waves back to back, each leg S steps (``noop`` tool call S-1 times, then
  an answer): hooks with the built-in plugins, the rate gate, conversation.jsonl,
  metadata.json, wave.json, a ledger row per leg — all a leg costs;
- bare: L chains of S sequential ``litellm.acompletion`` calls with the same messages.

``1x200`` is the leg loop itself: 200 sequential requests in one leg (its history grows to
400 messages, the same on both sides). ``20x10`` is twenty typical legs, each its own wave,
so it also carries what a wave and a leg cost once (wave.json twice, briefing.md, leg start
and end files, a ledger row): a few ms each, spread over 10 requests.
Repetitions alternate engine/bare; the median per-request wall time (and CPU time of this
process) is reported. Writes bench/results/leg_overhead.json.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import tempfile
import time
from pathlib import Path

from _common import (
    ModelNames,
    bare_chain,
    engine_setup,
    engine_wave,
    machine,
    offline,
    scripted_server,
    write_result,
    write_script,
)

TARGET_RATIO = 1.15


def parse_shape(text: str) -> tuple[int, int]:
    legs, _, steps = text.lower().partition("x")
    return int(legs), int(steps)


def run_engine(cfg, pm, runs: Path, models: list[str], steps: int) -> None:
    import anyio

    async def sequential():
        for model in models:
            # max_steps above the script's length: the last request keeps its tools, as the
            # bare loop's does (at max_steps the engine strips them and adds a directive).
            doc = await engine_wave(cfg, pm, runs, [model], max_steps=steps + 1).run()
            leg = doc["legs"][0]
            if leg["status"] != "complete" or leg["requests"] != steps:
                raise RuntimeError(f"leg did not make {steps} requests: {leg['status']} "
                                   f"{leg['requests']} {leg['reason']}")

    anyio.run(sequential)


def run_bare(lm, url: str, models: list[str], steps: int) -> None:
    async def sequential():
        for model in models:
            if await bare_chain(lm, url, model, steps) != 1 + 2 * (steps - 1):
                raise RuntimeError(f"bare chain did not make {steps} requests")

    asyncio.run(sequential())


def measure(fn, *args) -> tuple[float, float]:
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="1x200,20x10",
                        help="LEGSxSTEPS, comma-separated (each makes LEGS*STEPS requests)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--no-builtins", action="store_true",
                        help="load no built-in plugins in the engine runs")
    args = parser.parse_args()
    shapes = [parse_shape(s) for s in args.shapes.split(",")]
    offline()

    total = sum((2 * args.reps + 2) * legs for legs, _ in shapes)
    names = {shape: ModelNames(f"s{shape[0]}x{shape[1]}-", (2 * args.reps + 2) * shape[0])
             for shape in shapes}
    results = {}
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        tmp = Path(tmp)
        script: dict = {}
        for (_legs, steps), pool in names.items():
            write_script(tmp / "part.json", pool.all(), steps)
            script.update(json.loads((tmp / "part.json").read_text()))
        (tmp / "script.json").write_text(json.dumps(script))
        assert len(script) == total
        with scripted_server(latency_ms=0, script=tmp / "script.json") as url:
            cfg, pm = engine_setup(tmp / "home", url, builtins=not args.no_builtins)
            from orchestrator.runtime import litellm

            lm = litellm()
            runs = tmp / "home" / "runs"
            for (legs, steps), pool in names.items():
                n_req = legs * steps
                run_engine(cfg, pm, runs, pool.take(legs), steps)  # warm-up, untimed
                run_bare(lm, url, pool.take(legs), steps)
                samples = {"engine": [], "bare": []}
                for rep in range(args.reps):
                    order = ["engine", "bare"] if rep % 2 == 0 else ["bare", "engine"]
                    for side in order:
                        if side == "engine":
                            wall, cpu = measure(run_engine, cfg, pm, runs, pool.take(legs),
                                                steps)
                        else:
                            wall, cpu = measure(run_bare, lm, url, pool.take(legs), steps)
                        samples[side].append({"wall_ms": wall / n_req * 1e3,
                                              "cpu_ms": cpu / n_req * 1e3})
                med = {side: {k: statistics.median(s[k] for s in xs)
                              for k in ("wall_ms", "cpu_ms")} for side, xs in samples.items()}
                results[f"{legs}x{steps}"] = {
                    "requests": n_req, "samples": samples, "median": med,
                    "ratio_wall": med["engine"]["wall_ms"] / med["bare"]["wall_ms"],
                    "ratio_cpu": med["engine"]["cpu_ms"] / med["bare"]["cpu_ms"],
                    "per_rep_ratio_wall": [e["wall_ms"] / b["wall_ms"] for e, b in
                                           zip(samples["engine"], samples["bare"], strict=True)],
                }
                r = results[f"{legs}x{steps}"]
                print(f"  {legs}x{steps}: engine {med['engine']['wall_ms']:.2f} ms/request, "
                      f"bare {med['bare']['wall_ms']:.2f}, ratio {r['ratio_wall']:.3f}",
                      flush=True)

    print(f"\nper request, median of {args.reps} runs; zero-latency server; CPU = this "
          "process only (the server is another process)")
    print(f"{'shape':>7} {'requests':>8} {'engine ms':>10} {'bare ms':>8} {'ratio':>7} "
          f"{'engine cpu':>11} {'bare cpu':>9} {'cpu ratio':>9}")
    for shape, r in results.items():
        m = r["median"]
        print(f"{shape:>7} {r['requests']:>8} {m['engine']['wall_ms']:>10.2f} "
              f"{m['bare']['wall_ms']:>8.2f} {r['ratio_wall']:>6.3f}x "
              f"{m['engine']['cpu_ms']:>11.2f} {m['bare']['cpu_ms']:>9.2f} "
              f"{r['ratio_cpu']:>8.3f}x")
    for shape, r in results.items():
        verdict = "meets" if r["ratio_wall"] <= TARGET_RATIO else "MISSES"
        print(f"{shape}: engine/bare {r['ratio_wall']:.3f}x, {verdict} the {TARGET_RATIO}x "
              "target")
    worst = max(r["ratio_wall"] for r in results.values())
    write_result("leg_overhead", {
        "machine": machine(), "reps": args.reps, "builtins": not args.no_builtins,
        "results": results, "worst_ratio": worst, "target_ratio": TARGET_RATIO,
        "meets_target": worst <= TARGET_RATIO,
    })


if __name__ == "__main__":
    main()
