"""The bake-off's statistics: pure functions of trial outcomes, no I/O, seeded.

Tasks are the unit of resampling (a cluster bootstrap): trials of one task are not
independent, so every interval resamples whole tasks and keeps all of a task's trials. Every
metric is a ratio of per-task sums (passes / trials, tokens / passes, ...), so one matrix of
resample weights gives every contestant's interval and every paired Δ from the same draws.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

RESAMPLES = 10_000
ALPHA = 0.05
POWER = 0.80
MIN_TRIALS = 3  # fewer trials per task and pass^k says little: the report warns

# name -> (numerator field, denominator field); a trial contributes its fields to its task.
RATIOS: dict[str, tuple[str, str]] = {
    "pass": ("passed", "counted"),
    "tok_per_solved": ("tokens", "passed"),
    "cache_share": ("cached_tokens", "input_tokens"),
    "steps": ("steps", "counted"),
    "secs": ("secs", "counted"),
    "cost_per_trial": ("cost_usd", "counted"),
    "cost_per_solved": ("cost_usd", "passed"),
}
FIELDS = ("passed", "counted", "tokens", "cached_tokens", "input_tokens", "steps", "secs",
          "cost_usd")


# --- small exact pieces --------------------------------------------------------------------

def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided sign test (ties already dropped): P(as extreme | p = 1/2)."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1))
    return min(1.0, 2 * tail / 2**n)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment, in the input's order: monotone, capped at 1."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def pass_hat_k(passes: int, trials: int, k: int) -> float | None:
    """The unbiased chance that k trials drawn without replacement all pass: C(c,k)/C(n,k).
    None when the task has fewer than k trials."""
    if k < 1 or trials < k:
        return None
    return math.comb(passes, k) / math.comb(trials, k)


def pass_k(per_task: Iterable[tuple[int, int]], k: int) -> float | None:
    """pass^k averaged over the tasks with at least k trials."""
    values = [v for c, n in per_task if (v := pass_hat_k(c, n, k)) is not None]
    return sum(values) / len(values) if values else None


def minimum_detectable(tasks: int, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """The smallest pass-rate difference (0..1) a two-sided test at ``alpha`` detects with
    ``power`` over ``tasks`` tasks, at the worst-case variance (both rates 1/2)."""
    if tasks < 1:
        return None
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return min(1.0, z * math.sqrt(2 * 0.25 / tasks))


def pareto_front(points: dict[str, tuple[float, float | None]]) -> set[str]:
    """Names no other point dominates on (higher pass rate, lower cost). Unknown cost: out."""
    known = {n: (p, c) for n, (p, c) in points.items() if c is not None and not math.isnan(p)}
    front = set()
    for name, (p, c) in known.items():
        dominated = any(p2 >= p and c2 <= c and (p2 > p or c2 < c)
                        for other, (p2, c2) in known.items() if other != name)
        if not dominated:
            front.add(name)
    return front


def verdict(p_holm: float, low: float, high: float, alpha: float = ALPHA) -> str:
    """better/worse only when the adjusted p clears alpha AND the interval excludes 0."""
    if p_holm < alpha and low > 0:
        return "better"
    if p_holm < alpha and high < 0:
        return "worse"
    return "inconclusive"


# --- the bootstrap -------------------------------------------------------------------------

def resample_weights(tasks: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples × tasks) counts: how often each task is drawn in each resample."""
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, tasks, size=(resamples, tasks))
    drawn += (np.arange(resamples) * tasks)[:, None]  # one bincount for every row at once
    return np.bincount(drawn.ravel(), minlength=resamples * tasks).reshape(
        resamples, tasks).astype(float)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def _interval(draws: np.ndarray, alpha: float) -> tuple[float | None, float | None]:
    finite = draws[np.isfinite(draws)]
    if finite.size < max(10, draws.size // 2):  # mostly undefined: no honest interval
        return None, None
    low, high = np.percentile(finite, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(low), float(high)


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


# --- the whole analysis --------------------------------------------------------------------

@dataclass
class Table:
    """Per task × contestant sums of each field; ``unknown_cost`` marks contestants with a
    trial of unknown cost (their cost metrics are not computed)."""

    tasks: list[str]
    contestants: list[str]
    sums: dict[str, np.ndarray]
    per_task: dict[str, list[tuple[int, int]]]
    unknown_cost: set[str] = field(default_factory=set)


def tabulate(trials: Iterable[dict[str, Any]], contestants: Sequence[str],
             tasks: Sequence[str]) -> Table:
    """Sum counted (not excluded) trials into task × contestant matrices."""
    ti = {t: i for i, t in enumerate(tasks)}
    ci = {c: j for j, c in enumerate(contestants)}
    sums = {f: np.zeros((len(tasks), len(contestants))) for f in FIELDS}
    unknown: set[str] = set()
    for trial in trials:
        if trial.get("excluded") or trial["task"] not in ti or trial["contestant"] not in ci:
            continue
        i, j = ti[trial["task"]], ci[trial["contestant"]]
        sums["counted"][i, j] += 1
        sums["passed"][i, j] += bool(trial.get("passed"))
        for f in ("tokens", "cached_tokens", "input_tokens", "steps", "secs"):
            sums[f][i, j] += float(trial.get(f) or 0)
        if trial.get("cost_usd") is None:
            unknown.add(trial["contestant"])
        else:
            sums["cost_usd"][i, j] += float(trial["cost_usd"])
    per_task = {c: [(int(sums["passed"][i, j]), int(sums["counted"][i, j]))
                    for i in range(len(tasks))] for j, c in enumerate(contestants)}
    return Table(list(tasks), list(contestants), sums, per_task, unknown)


def analyse(trials: Iterable[dict[str, Any]], contestants: Sequence[str],
            tasks: Sequence[str], *, k: int | None = None, resamples: int = RESAMPLES,
            seed: int = 0, alpha: float = ALPHA) -> dict[str, Any]:
    """Every number the report prints. The first contestant is the baseline."""
    table = tabulate(trials, contestants, tasks)
    n_tasks, names = len(table.tasks), table.contestants
    weights = resample_weights(n_tasks, resamples, seed) if n_tasks else np.zeros((0, 0))
    trials_per_task = int(table.sums["counted"].max()) if table.sums["counted"].size else 0
    k = k or max(1, trials_per_task)
    metrics: dict[str, dict[str, Any]] = {}
    for metric, (num_f, den_f) in RATIOS.items():
        num, den = table.sums[num_f], table.sums[den_f]
        point = _ratio(num.sum(axis=0), den.sum(axis=0))
        draws = _ratio(weights @ num, weights @ den) if n_tasks else np.zeros((0, len(names)))
        metrics[metric] = {}
        for j, name in enumerate(names):
            if metric.startswith("cost") and name in table.unknown_cost:
                metrics[metric][name] = {"value": None, "ci": [None, None],
                                         "delta": None, "delta_ci": [None, None]}
                continue
            low, high = _interval(draws[:, j], alpha) if n_tasks else (None, None)
            entry = {"value": _num(point[j]), "ci": [_num(low), _num(high)]}
            base_unknown = metric.startswith("cost") and names[0] in table.unknown_cost
            if j > 0 and not base_unknown:
                d_low, d_high = _interval(draws[:, j] - draws[:, 0], alpha) if n_tasks \
                    else (None, None)
                entry["delta"] = _num(point[j] - point[0])
                entry["delta_ci"] = [_num(d_low), _num(d_high)]
            metrics[metric][name] = entry
    rows = []
    for j, name in enumerate(names):
        rows.append({"contestant": name, "trials": int(table.sums["counted"][:, j].sum()),
                     "pass_k": pass_k(table.per_task[name], k),
                     **{m: metrics[m][name] for m in RATIOS}})
    comparisons = _compare(table, metrics, alpha)
    front = pareto_front({n: (metrics["pass"][n]["value"] or 0.0,
                              metrics["cost_per_trial"][n]["value"]) for n in names})
    for row in rows:
        row["pareto"] = row["contestant"] in front
    mdd = minimum_detectable(n_tasks, alpha)
    warnings = []
    if 0 < trials_per_task < MIN_TRIALS:
        warnings.append(f"only {trials_per_task} trial(s) per task: pass^k and the intervals "
                        f"are rough; use --trials {MIN_TRIALS} or more")
    return {"baseline": names[0] if names else None, "tasks": n_tasks, "k": k,
            "resamples": resamples, "seed": seed, "alpha": alpha, "rows": rows,
            "comparisons": comparisons, "pareto": sorted(front),
            "min_detectable": mdd, "warnings": warnings}


def _compare(table: Table, metrics: dict, alpha: float) -> list[dict[str, Any]]:
    """Each contestant against the baseline, paired by task; Holm across contestants."""
    names = table.contestants
    if len(names) < 2:
        return []
    passed, counted = table.sums["passed"], table.sums["counted"]
    out = []
    for j in range(1, len(names)):
        both = (counted[:, 0] > 0) & (counted[:, j] > 0)
        base = passed[both, 0] / counted[both, 0]
        other = passed[both, j] / counted[both, j]
        wins, losses = int((other > base).sum()), int((other < base).sum())
        ties = int(both.sum()) - wins - losses
        out.append({"contestant": names[j], "delta": metrics["pass"][names[j]]["delta"],
                    "delta_ci": metrics["pass"][names[j]]["delta_ci"],
                    "wins": wins, "losses": losses, "ties": ties,
                    "p": sign_test(wins, losses),
                    "delta_tok_per_solved": metrics["tok_per_solved"][names[j]].get("delta"),
                    "delta_tok_per_solved_ci":
                        metrics["tok_per_solved"][names[j]].get("delta_ci")})
    for row, adjusted in zip(out, holm([r["p"] for r in out]), strict=True):
        row["p_holm"] = adjusted
        low, high = row["delta_ci"]
        row["verdict"] = "inconclusive" if low is None else verdict(adjusted, low, high, alpha)
    return out


# --- validation ----------------------------------------------------------------------------

def coverage(benches: int = 1000, tasks: int = 100, trials: int = 3, *, a: float = 2.0,
             b: float = 2.0, resamples: int = 1000, seed: int = 0,
             alpha: float = ALPHA) -> float:
    """The share of simulated benches whose interval covers the true pass rate. Task
    difficulties come from Beta(a, b) (true rate a/(a+b)); each trial passes with its task's
    probability."""
    rng = np.random.default_rng(seed)
    truth = a / (a + b)
    hits = 0
    for bench in range(benches):
        p = rng.beta(a, b, size=tasks)
        passes = rng.binomial(trials, p).astype(float)
        weights = resample_weights(tasks, resamples, seed + 1 + bench)
        draws = (weights @ passes) / (weights.sum(axis=1) * trials)
        low, high = np.percentile(draws, [100 * alpha / 2, 100 * (1 - alpha / 2)])
        hits += low <= truth <= high
    return hits / benches
