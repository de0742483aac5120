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

# what a comparison lets a user conclude lives beside: these names are the statistics' too
from orchestrator.bakeoff.verdicts import (  # noqa: F401 - re-exported
    ALPHA,
    POWER,
    VERSUS_WORDS,
    tasks_needed,
    verdict,
    versus_verdict,
)

RESAMPLES = 10_000
MIN_TRIALS = 3  # fewer trials per task and pass^k says little: the report warns
COVERAGE_FROM = 10  # tasks: from here up the pass-rate interval's coverage is measured 93-97%

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
          "cost_usd", "answered")
TOKEN_METRICS = ("tok_per_solved", "cache_share")
FAILED_RUN = ("error", "aborted", "refused")  # a trial that ended so produced no answer


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
    """pass^k averaged over the tasks with at least k trials (:func:`pass_k_tasks` says how
    many: a task with fewer trials says nothing about k in a row)."""
    values = [v for c, n in per_task if (v := pass_hat_k(c, n, k)) is not None]
    return sum(values) / len(values) if values else None


def pass_k_tasks(per_task: Iterable[tuple[int, int]], k: int) -> int:
    """How many tasks pass^k averages over: those with at least k trials."""
    return sum(1 for _, n in per_task if n >= k >= 1)


def minimum_detectable(tasks: int, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """The smallest pass-rate difference (0..1) a two-sided test at ``alpha`` detects with
    ``power`` over ``tasks`` tasks, at the worst-case variance (both rates 1/2)."""
    if tasks < 1:
        return None
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return min(1.0, z * math.sqrt(2 * 0.25 / tasks))


def pareto_front(points: dict[str, tuple[float, float | None]]) -> set[str]:
    """Names no other point dominates on (higher pass rate, lower cost). Unknown cost or
    unknown pass rate (no valid trial): out."""
    known = {n: (p, c) for n, (p, c) in points.items()
             if c is not None and p is not None and not math.isnan(p)}
    front = set()
    for name, (p, c) in known.items():
        dominated = any(p2 >= p and c2 <= c and (p2 > p or c2 < c)
                        for other, (p2, c2) in known.items() if other != name)
        if not dominated:
            front.add(name)
    return front


def wilson_cluster(passes: np.ndarray, trials: np.ndarray, alpha: float = ALPHA
                   ) -> tuple[np.ndarray, np.ndarray]:
    """A Wilson score interval for a pass rate whose trials come in clusters (tasks).

    ``passes`` and ``trials``: (..., tasks) per-task counts (tasks with no trial hold 0 and
    are not counted). The rate is pooled (passes / trials); its variance comes from the
    tasks (the ratio estimator's linearisation, so trials of one task are not taken as
    independent), and Wilson's interval is drawn with the effective sample size that
    variance implies (capped at the trial count; at one task, 1). Chosen over the
    percentile bootstrap by measured coverage: 94-97% from 10 tasks up (see
    :func:`coverage`), where the percentile bootstrap gave 88-92% at 13 tasks."""
    passes, trials = np.asarray(passes, float), np.asarray(trials, float)
    n = (trials > 0).sum(axis=-1)
    total = trials.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(total > 0, passes.sum(axis=-1) / np.where(total > 0, total, 1), np.nan)
        resid = passes - p[..., None] * trials
        var = (resid ** 2).sum(axis=-1) * n / np.maximum(n - 1, 1) / np.maximum(total, 1) ** 2
        eff = np.where(var > 0, p * (1 - p) / np.where(var > 0, var, 1), total)
    eff = np.where(n < 2, 1.0, np.clip(eff, 1.0, np.maximum(total, 1)))
    z = NormalDist().inv_cdf(1 - alpha / 2)
    den = 1 + z * z / eff
    mid = (p + z * z / (2 * eff)) / den
    half = z * np.sqrt(np.clip(p * (1 - p), 0, None) / eff + z * z / (4 * eff * eff)) / den
    return np.clip(mid - half, 0, 1), np.clip(mid + half, 0, 1)


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


def expanded_tail(tasks: int, alpha: float = ALPHA) -> float:
    """The tail each side of an expanded percentile bootstrap (Hesterberg 2015): the plain
    percentile interval is too narrow on few clusters (it uses n, not n-1, and z, not t),
    so it is widened to the width a t interval on ``tasks`` tasks would have."""
    if tasks < 2:
        return alpha / 2
    return NormalDist().cdf(-math.sqrt(tasks / (tasks - 1))
                            * t_quantile(1 - alpha / 2, tasks - 1))


def t_quantile(q: float, df: int) -> float:
    """Student's t quantile by the Cornish-Fisher expansion (exact at 1 and 2 degrees of
    freedom, within 0.2% from 3 at the 97.5% point; scipy is not a run-time dependency)."""
    if df == 1:  # Cauchy: exact
        return math.tan(math.pi * (q - 0.5))
    if df == 2:  # exact
        return (2 * q - 1) / math.sqrt(2 * q * (1 - q))
    z = NormalDist().inv_cdf(q)
    v = float(df)
    return (z + (z**3 + z) / (4 * v) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
            + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z)
            / (92160 * v**4))


def _interval(draws: np.ndarray, alpha: float, tasks: int | None = None
              ) -> tuple[float | None, float | None]:
    finite = draws[np.isfinite(draws)]
    if finite.size < max(10, draws.size // 2):  # mostly undefined: no honest interval
        return None, None
    tail = alpha / 2 if tasks is None else expanded_tail(tasks, alpha)
    low, high = np.percentile(finite, [100 * tail, 100 * (1 - tail)])
    return float(low), float(high)


def _num(x: float) -> float | None:
    """A finite number, with the dust of float arithmetic swept off (a Δ of equal costs
    is 0, not 3.39e-21)."""
    return None if x is None or not math.isfinite(x) else round(float(x), 12) + 0.0


# --- the whole analysis --------------------------------------------------------------------

@dataclass
class Table:
    """Per task × contestant sums of each field; ``unknown_cost`` (``unknown_tokens``)
    marks contestants with a trial of unknown cost (tokens): those metrics are not computed,
    never shown as 0."""

    tasks: list[str]
    contestants: list[str]
    sums: dict[str, np.ndarray]
    per_task: dict[str, list[tuple[int, int]]]
    unknown_cost: set[str] = field(default_factory=set)
    unknown_tokens: set[str] = field(default_factory=set)

    def unknown(self, metric: str, name: str) -> bool:
        return (metric.startswith("cost") and name in self.unknown_cost) or \
            (metric in TOKEN_METRICS and name in self.unknown_tokens)

    def shared(self, a: int, b: int) -> np.ndarray:
        """The tasks both contestants have counted trials for: where a paired Δ lives."""
        counted = self.sums["counted"]
        return (counted[:, a] > 0) & (counted[:, b] > 0)


def tabulate(trials: Iterable[dict[str, Any]], contestants: Sequence[str],
             tasks: Sequence[str]) -> Table:
    """Sum counted (not excluded) trials into task × contestant matrices."""
    ti = {t: i for i, t in enumerate(tasks)}
    ci = {c: j for j, c in enumerate(contestants)}
    sums = {f: np.zeros((len(tasks), len(contestants))) for f in FIELDS}
    unknown: set[str] = set()
    unknown_tokens: set[str] = set()
    for trial in trials:
        if trial.get("excluded") or trial["task"] not in ti or trial["contestant"] not in ci:
            continue
        i, j = ti[trial["task"]], ci[trial["contestant"]]
        sums["counted"][i, j] += 1
        sums["passed"][i, j] += bool(trial.get("passed"))
        sums["answered"][i, j] += trial.get("status") not in FAILED_RUN
        if trial.get("tokens") is None and "tokens" in trial:
            unknown_tokens.add(trial["contestant"])
        for f in ("tokens", "cached_tokens", "input_tokens", "steps", "secs"):
            sums[f][i, j] += float(trial.get(f) or 0)
        if trial.get("cost_usd") is None:
            unknown.add(trial["contestant"])
        else:
            sums["cost_usd"][i, j] += float(trial["cost_usd"])
    per_task = {c: [(int(sums["passed"][i, j]), int(sums["counted"][i, j]))
                    for i in range(len(tasks))] for j, c in enumerate(contestants)}
    return Table(list(tasks), list(contestants), sums, per_task, unknown, unknown_tokens)


def analyse(trials: Iterable[dict[str, Any]], contestants: Sequence[str],
            tasks: Sequence[str], *, k: int | None = None, resamples: int = RESAMPLES,
            seed: int = 0, alpha: float = ALPHA,
            ensembles: dict[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """Every number the report prints. The first contestant is the baseline.

    Each contestant's own numbers use the tasks it has trials for; every Δ against the
    baseline uses only the tasks both have trials for (an interrupted run, an exclusion or
    a slower contestant leaves holes, and an unpaired Δ compares different tasks).
    ``ensembles``: ensemble contestant -> its members' contestant names; each ensemble is
    also compared, paired, with its best member (the highest pass rate)."""
    table = tabulate(trials, contestants, tasks)
    n_tasks, names = len(table.tasks), table.contestants
    counted = table.sums["counted"]
    weights = resample_weights(n_tasks, resamples, seed) if n_tasks else np.zeros((0, 0))
    trials_per_task = int(counted.max()) if counted.size else 0
    k = k or max(1, trials_per_task)
    paired = {j: _Paired(table.shared(0, j), resamples, seed) for j in range(1, len(names))}
    metrics: dict[str, dict[str, Any]] = {}
    for metric, (num_f, den_f) in RATIOS.items():
        num, den = table.sums[num_f], table.sums[den_f]
        point = _ratio(num.sum(axis=0), den.sum(axis=0))
        draws = _ratio(weights @ num, weights @ den) if n_tasks else np.zeros((0, len(names)))
        metrics[metric] = {}
        for j, name in enumerate(names):
            if table.unknown(metric, name):
                metrics[metric][name] = {"value": None, "ci": [None, None],
                                         "delta": None, "delta_ci": [None, None]}
                continue
            if metric == "pass":  # the pass rate's interval: Wilson on the tasks
                low, high = (float(x) for x in wilson_cluster(num[:, j], den[:, j], alpha))
            else:
                low, high = _interval(draws[:, j], alpha, n_tasks) if n_tasks \
                    else (None, None)
            entry = {"value": _num(point[j]), "ci": [_num(low), _num(high)]}
            if j > 0:
                entry["delta"], entry["delta_ci"] = (None, [None, None]) \
                    if table.unknown(metric, names[0]) else \
                    paired[j].delta(num[:, [0, j]], den[:, [0, j]], alpha)
            metrics[metric][name] = entry
    rows = []
    for j, name in enumerate(names):
        rows.append({"contestant": name, "trials": int(counted[:, j].sum()),
                     "passed": int(table.sums["passed"][:, j].sum()),
                     "tasks": int((counted[:, j] > 0).sum()),
                     "pass_k": pass_k(table.per_task[name], k),
                     "pass_k_tasks": pass_k_tasks(table.per_task[name], k),
                     **{m: metrics[m][name] for m in RATIOS}})
    comparisons = _compare(table, metrics, paired, alpha)
    answered = table.sums["answered"].sum(axis=0)
    front = pareto_front({n: (metrics["pass"][n]["value"] if answered[j] else None,
                              metrics["cost_per_trial"][n]["value"])
                          for j, n in enumerate(names)})
    for row in rows:
        row["pareto"] = row["contestant"] in front
    # the tasks a comparison can use: shared ones; alone, the tasks with any trial
    graded = min((c["tasks"] for c in comparisons), default=int((counted.sum(axis=1) > 0).sum()))
    mdd = minimum_detectable(graded, alpha)
    warnings = []
    if 0 < graded < COVERAGE_FROM:
        warnings.append(f"only {graded} task(s) graded: the 95% intervals are approximate "
                        f"(their coverage is measured from {COVERAGE_FROM} tasks up)")
    if 0 < trials_per_task < MIN_TRIALS:
        warnings.append(f"only {trials_per_task} trial(s) per task: pass^k and the intervals "
                        f"are rough; use --trials {MIN_TRIALS} or more")
    versus = [_versus(table, metrics, name, members, resamples, seed, alpha)
              for name, members in (ensembles or {}).items()
              if name in names and any(m in names for m in members)]
    for v, adjusted in zip(versus, holm([v["p"] for v in versus]), strict=True):
        low, high = v["delta_ci"]
        v["p_holm"] = adjusted
        v["verdict"], v["needs_tasks"] = versus_verdict(
            adjusted, low, high, v["wins"], v["losses"], v["ties"], len(versus), alpha)
    return {"baseline": names[0] if names else None, "tasks": n_tasks, "k": k,
            "graded_tasks": graded, "ensembles": versus,
            "resamples": resamples, "seed": seed, "alpha": alpha, "rows": rows,
            "comparisons": comparisons, "pareto": sorted(front),
            "min_detectable": mdd, "warnings": warnings}


class _Paired:
    """A paired comparison's tasks (both contestants have trials) and its own resample
    weights over just those tasks, so the Δ interval resamples the pairs it is made of."""

    def __init__(self, mask: np.ndarray, resamples: int, seed: int):
        self.mask = mask
        self.n = int(mask.sum())
        self.weights = resample_weights(self.n, resamples, seed) if self.n else None

    def delta(self, num: np.ndarray, den: np.ndarray, alpha: float
              ) -> tuple[float | None, list[float | None]]:
        """Δ (second column minus first) of a ratio metric on the shared tasks, with its
        interval."""
        if not self.n:
            return None, [None, None]
        num, den = num[self.mask], den[self.mask]
        point = _ratio(num.sum(axis=0), den.sum(axis=0))
        draws = _ratio(self.weights @ num, self.weights @ den)
        low, high = _interval(draws[:, 1] - draws[:, 0], alpha, self.n)
        return _num(point[1] - point[0]), [_num(low), _num(high)]


def _versus(table: Table, metrics: dict, name: str, members: Sequence[str], resamples: int,
            seed: int, alpha: float) -> dict[str, Any]:
    """An ensemble against its best member, paired on their shared tasks: Δ pass with its
    interval, W/L/T, the sign test's p, and the cost ratio (ensemble / member per trial)."""
    names = table.contestants
    candidates = [m for m in members if m in names]
    rate = {m: metrics["pass"][m]["value"] for m in candidates}
    best = max(candidates, key=lambda m: (rate[m] if rate[m] is not None else -1.0,
                                          -candidates.index(m)))
    # equal pass rates: the first in the ensemble's models is compared, the others named
    tied = [m for m in candidates if m != best and rate[m] is not None and
            rate[best] is not None and math.isclose(rate[m], rate[best], abs_tol=1e-12)]
    i, j = names.index(best), names.index(name)
    pair = _Paired(table.shared(i, j), resamples, seed)
    passed, counted = table.sums["passed"], table.sums["counted"]
    delta, ci = pair.delta(passed[:, [i, j]], counted[:, [i, j]], alpha)
    mask = pair.mask
    member_rate = passed[mask, i] / np.maximum(counted[mask, i], 1)
    ensemble_rate = passed[mask, j] / np.maximum(counted[mask, j], 1)
    wins = int((ensemble_rate > member_rate).sum())
    losses = int((ensemble_rate < member_rate).sum())
    cost_e, cost_m = (metrics["cost_per_trial"][n]["value"] for n in (name, best))
    return {"contestant": name, "best_member": best, "tied": tied, "tasks": pair.n,
            "delta": delta,
            "delta_ci": ci, "wins": wins, "losses": losses, "ties": pair.n - wins - losses,
            "p": sign_test(wins, losses),
            "cost_ratio": None if cost_e is None or not cost_m else cost_e / cost_m}


def _compare(table: Table, metrics: dict, paired: dict[int, _Paired],
             alpha: float) -> list[dict[str, Any]]:
    """Each contestant against the baseline, paired by task; Holm across contestants."""
    names = table.contestants
    if len(names) < 2:
        return []
    passed, counted = table.sums["passed"], table.sums["counted"]
    out = []
    for j in range(1, len(names)):
        both = paired[j].mask
        base = passed[both, 0] / counted[both, 0]
        other = passed[both, j] / counted[both, j]
        wins, losses = int((other > base).sum()), int((other < base).sum())
        ties = int(both.sum()) - wins - losses
        out.append({"contestant": names[j], "tasks": int(both.sum()),
                    "delta": metrics["pass"][names[j]]["delta"],
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
             b: float = 2.0, seed: int = 0, alpha: float = ALPHA) -> float:
    """The share of simulated benches whose pass-rate interval (:func:`wilson_cluster`, the
    one the report prints) covers the true pass rate. Task difficulties come from Beta(a, b)
    (true rate a/(a+b)); each trial passes with its task's probability."""
    rng = np.random.default_rng(seed)
    p = rng.beta(a, b, size=(benches, tasks))
    passes = rng.binomial(trials, p).astype(float)
    low, high = wilson_cluster(passes, np.full_like(passes, trials), alpha)
    truth = a / (a + b)
    return float(np.mean((low <= truth) & (truth <= high)))
