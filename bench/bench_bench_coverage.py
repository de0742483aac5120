"""The coverage of `orch bench`'s 95% pass-rate interval, measured at length.

Run by hand: ``.venv/bin/python bench/bench_bench_coverage.py [--benches 40000]``.

For each suite size (5, 8, 10, 13, 20, 30, 100 tasks × 3 trials) and task-difficulty law
(Beta(a, b): the true pass rate is a/(a+b)), simulate ``--benches`` benches and count how
often :func:`orchestrator.bakeoff.stats.wilson_cluster` covers the true rate. The test
(``tests/test_bench_stats.py``) runs 4,000 benches at 10, 13, 30 and 100 tasks; this is the
longer run behind the "coverage holds from 10 tasks" claim the report makes.
Then the paired Δ interval (the expanded-percentile cluster bootstrap over shared tasks):
``--delta-benches`` benches of two contestants, the second's task rates the first's + 0.1
(clipped), 1,000 resamples each, at 10, 13, 30 and 100 tasks.
Target: 93-97% at every size from 10 tasks.

Writes bench/results/bench_coverage.json.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import machine, write_result

from orchestrator.bakeoff import stats

SIZES = (5, 8, 10, 13, 20, 30, 100)
LAWS = ((4, 1), (8, 1), (20, 1), (2, 2), (1, 1), (1, 4))


def coverage_delta(benches: int, tasks: int, trials: int = 3, a: float = 2, b: float = 2,
                   shift: float = 0.1, seed: int = 0, resamples: int = 1000) -> float:
    """The share of simulated paired benches whose Δ interval covers the true Δ."""
    rng = np.random.default_rng(seed)
    big = rng.beta(a, b, 2_000_000)
    truth = np.clip(big + shift, 0, 1).mean() - big.mean()
    hits = 0
    for i in range(benches):
        p = rng.beta(a, b, tasks)
        x = rng.binomial(trials, p).astype(float)
        y = rng.binomial(trials, np.clip(p + shift, 0, 1)).astype(float)
        pair = stats._Paired(np.ones(tasks, bool), resamples, seed + 1 + i)
        num = np.stack([x, y], 1)
        _, (low, high) = pair.delta(num, np.full_like(num, trials), stats.ALPHA)
        hits += low is not None and low <= truth <= high
    return hits / benches


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--benches", type=int, default=40_000)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--delta-benches", type=int, default=2000)
    args = ap.parse_args()
    started = time.perf_counter()
    table = {}
    for tasks in SIZES:
        row = {f"Beta({a},{b})": stats.coverage(args.benches, tasks, args.trials, a=a, b=b,
                                                seed=tasks)
               for a, b in LAWS}
        table[tasks] = row
        print(f"{tasks:4d} tasks: " + "  ".join(f"{k} {v:.3f}" for k, v in row.items()),
              flush=True)
    holds = [t for t in SIZES if all(0.93 <= v <= 0.97 for v in table[t].values())]
    print(f"93-97% at: {holds} (COVERAGE_FROM = {stats.COVERAGE_FROM})")
    delta = {}
    for tasks in (10, 13, 30, 100):
        delta[tasks] = {f"Beta({a},{b})": coverage_delta(args.delta_benches, tasks,
                                                         args.trials, a, b, seed=tasks)
                        for a, b in ((4, 1), (2, 2), (1, 1))}
        print(f"Δ {tasks:4d} tasks: " + "  ".join(f"{k} {v:.3f}"
                                                  for k, v in delta[tasks].items()), flush=True)
    write_result("bench_coverage", {"machine": machine(), "benches": args.benches,
                                    "trials": args.trials, "coverage": table,
                                    "holds_at": holds, "delta_coverage": delta,
                                    "secs": round(time.perf_counter() - started, 1)})


if __name__ == "__main__":
    main()
