"""`orch bench` overhead and the speed of its statistics.

Run by hand: ``.venv/bin/python bench/bench_bakeoff.py [--reps 3] [--latency-ms 1000]``.

1. A bake-off of 3 model contestants × 13 tasks (the built-in ``reading`` suite) × 3 trials
   = 117 trials, every trial a one-leg wave on one shared server, with its own folder (a copy
   of the task's start state and repository), graded by its hidden check, one ledger row
   each, ``--jobs 117`` - against the same 117 legs (same prompts, same read-only tools over
   the suite's files) as ONE fanout wave (the baseline). The
   scripted server (its own process) answers every request after ``--latency-ms``. Runs
   alternate bench/fanout; medians. Target: bench ≤ 1.2 × fanout.
2. The statistics (``orchestrator.bakeoff.stats.analyse``) for 10 contestants × 500 tasks × 5
   trials with 10,000 resamples. Target: under 2 s.

Writes bench/results/bakeoff.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from _common import (
    PROVIDER,
    engine_setup,
    machine,
    offline,
    scripted_server,
    write_result,
)

CONTESTANTS, TASKS, TRIALS = 3, 13, 3
TARGET_RATIO, TARGET_STATS_S = 1.2, 2.0


def bench_run(cfg, pm, runs: Path, prefix: str) -> float:
    import anyio

    from orchestrator.bakeoff.contestants import Contestant
    from orchestrator.bakeoff.plan import Plan
    from orchestrator.bakeoff.run import Runner, new_bench_id
    from orchestrator.bakeoff.tasks import load_tasks, suite_dir
    from orchestrator.engine.ledger_sink import LedgerSink
    from orchestrator.models.resolve import resolve_all

    tasks = load_tasks(suite_dir("reading"))[:TASKS]
    contestants = [Contestant(name=f"{prefix}{i}", kind="model", model=f"{PROVIDER}/{prefix}{i}")
                   for i in range(CONTESTANTS)]
    plan = Plan(contestants=contestants, tasks=tasks, source="builtin:reading",
                trials=TRIALS, jobs=CONTESTANTS * TASKS * TRIALS, timeout_s=600)
    resolved = {c.name: resolve_all([c.model], cfg, pm)[0] for c in contestants}
    runner = Runner(plan=plan, bench_id=new_bench_id(), config=cfg,
                    pms={c.name: pm for c in contestants}, resolved=resolved,
                    ledger=LedgerSink(), runs_dir=runs)
    start = time.perf_counter()
    rows = anyio.run(runner.run)
    took = time.perf_counter() - start
    bad = [r for r in rows if r["status"] != "complete" or r["excluded"]]
    if len(rows) != CONTESTANTS * TASKS * TRIALS or bad:
        raise RuntimeError(f"bench did not complete every trial: {bad[:1]}")
    return took


def fanout_run(cfg, pm, runs: Path, prefix: str) -> float:
    """The same 117 legs (same prompts, same read-only tools over the suite's files) as one
    wave, the way `orch fanout` runs it."""
    import anyio

    from orchestrator.bakeoff.tasks import load_tasks, make_folder, remove_folder, suite_dir
    from orchestrator.engine.ledger_sink import LedgerSink
    from orchestrator.engine.wave import Wave, WaveSpec
    from orchestrator.models.resolve import resolve_all

    tasks = load_tasks(suite_dir("reading"))[:TASKS]
    briefings = [t.text for t in tasks for _ in range(CONTESTANTS) for _ in range(TRIALS)]
    models = resolve_all([f"{PROVIDER}/{prefix}{i}" for i in range(len(briefings))], cfg, pm)
    workspace = make_folder(tasks[0])
    try:
        spec = WaveSpec(models=models, briefing=briefings[0], briefings=briefings,
                        runs_dir=runs, workspace=workspace,
                        options={"tools": "read", "workspace": str(workspace)})
        wave = Wave(spec, pm=pm, config=cfg, ledger=LedgerSink())
        start = time.perf_counter()
        doc = anyio.run(wave.run)
        took = time.perf_counter() - start
    finally:
        remove_folder(workspace)
    if doc["status"] != "complete":
        raise RuntimeError(f"fanout wave ended {doc['status']}")
    return took


def stats_run(seed: int) -> float:
    from orchestrator.bakeoff.stats import analyse

    rng = random.Random(seed)
    names = [f"c{i}" for i in range(10)]
    tasks = [f"t{i}" for i in range(500)]
    trials = [{"contestant": c, "task": t, "passed": rng.random() < 0.3 + 0.04 * j,
               "tokens": rng.randint(100, 5000), "input_tokens": 900, "cached_tokens": 100,
               "steps": 3, "secs": 2.5, "cost_usd": 0.001}
              for j, c in enumerate(names) for t in tasks for _ in range(5)]
    start = time.perf_counter()
    analyse(trials, names, tasks, resamples=10_000, seed=seed)
    return time.perf_counter() - start


def measure(reps: int, url: str, tmp: Path) -> tuple[list[float], list[float]]:
    cfg, pm = engine_setup(tmp / "home", url)
    runs = tmp / "runs"
    bench_s, fanout_s = [], []
    for rep in range(reps):
        bench_s.append(bench_run(cfg, pm, runs, f"b{rep}-"))
        fanout_s.append(fanout_run(cfg, pm, runs, f"f{rep}-"))
        print(f"rep {rep}: bench {bench_s[-1]:.2f}s  fanout {fanout_s[-1]:.2f}s", flush=True)
    return bench_s, fanout_s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=1000.0)
    args = parser.parse_args()
    offline()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.json"
        script.write_text("{}")  # every model answers "ok" after the latency
        with scripted_server(latency_ms=args.latency_ms, script=script) as url:
            bench_s, fanout_s = measure(args.reps, url, Path(tmp))
    stats_s = [stats_run(seed) for seed in range(args.reps)]
    ratio = statistics.median(bench_s) / statistics.median(fanout_s)
    result = {
        "machine": machine(), "latency_ms": args.latency_ms, "reps": args.reps,
        "trials": CONTESTANTS * TASKS * TRIALS, "bench_s": bench_s, "fanout_s": fanout_s,
        "ratio_bench_over_fanout": round(ratio, 3), "target_ratio": TARGET_RATIO,
        "stats_10x500x5_s": stats_s, "stats_median_s": round(statistics.median(stats_s), 3),
        "target_stats_s": TARGET_STATS_S,
    }
    print(json.dumps({k: result[k] for k in ("ratio_bench_over_fanout", "stats_median_s")}))
    write_result("bakeoff", result)


if __name__ == "__main__":
    main()
