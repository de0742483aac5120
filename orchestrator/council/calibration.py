"""Judge calibration (``orch council stats --judges``): how far each judge's votes can be
trusted, from the judges' votes the council ledger keeps (``ledger/vote_table.py``). Pure
functions of plain rows, no I/O, seeded.

Per judge, over the findings it was eligible to vote on (it raised none of the group's):

- **agreement with the others**: Krippendorff's alpha (nominal: agree, dispute, neutral)
  between the judge and the majority of the other eligible judges who voted on the same
  finding (findings where the others tie are left out): 1 is perfect agreement, 0 is what
  chance would give, below 0 systematic disagreement;
- **position bias**: its agree rate on findings its own shuffled view showed in the first
  half, less its agree rate on those shown in the second half (a middle one counts in
  neither; a finding it did not vote on is not an agree): 0 when the order it read them in
  does not move it;
- **agreement with the final tier**: how often its vote is the side its group's tier took
  (confirmed: agree, disputed: dispute, singleton: neutral; contested groups have no side
  and are left out; a missing vote counts neutral, as in the tally). Its own vote is part
  of that tier.

Votes of one council run are not independent (one judge, one code base), so every interval
treats the run as the unit: the rates' are the cluster Wilson intervals of the bench
(``bakeoff/stats.py``), the position bias's is Newcombe's hybrid score interval over two of
them, alpha's a percentile bootstrap over runs. The panel's alpha (every judge, every
finding) is given too. Krippendorff's alpha is computed here, from its coincidence matrix
(Krippendorff 2011, "Computing Krippendorff's Alpha-Reliability"): the ``krippendorff``
package, which the tests check this against, is GPL-licensed.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from orchestrator.bakeoff.stats import ALPHA, wilson_cluster

VALUES = ("agree", "dispute", "neutral")
SIDE = {"confirmed": "agree", "disputed": "dispute", "singleton": "neutral"}
RESAMPLES = 2000


# --- Krippendorff's alpha ------------------------------------------------------------------

def coincidences(units: Iterable[Sequence[Hashable | None]], values: Sequence[Hashable]
                 ) -> np.ndarray:
    """The coincidence matrix of ``units`` (each the values its coders gave, None where a
    coder gave none): each unit with m ≥ 2 values adds 1/(m − 1) for every ordered pair of
    its values from different coders."""
    index = {v: i for i, v in enumerate(values)}
    out = np.zeros((len(values), len(values)))
    for unit in units:
        given = [index[v] for v in unit if v is not None]
        m = len(given)
        if m < 2:
            continue
        counts = np.bincount(given, minlength=len(values)).astype(float)
        out += (np.outer(counts, counts) - np.diag(counts)) / (m - 1)
    return out


def alpha_of(o: np.ndarray) -> float | None:
    """Nominal alpha from a coincidence matrix: 1 − (n − 1) · D_o / D_e; None when it is
    undefined (fewer than two pairable values, or every value the same)."""
    n_c = o.sum(axis=1)
    n = n_c.sum()
    expected = n * n - (n_c ** 2).sum()  # Σ_{c≠k} n_c n_k
    if n <= 1 or expected <= 0:
        return None
    observed = o.sum() - np.trace(o)
    return float(1 - (n - 1) * observed / expected)


def alpha_nominal(units: Iterable[Sequence[Hashable | None]]) -> float | None:
    """Krippendorff's alpha for nominal values (None: a coder gave no value)."""
    units = [list(u) for u in units]
    values = sorted({v for u in units for v in u if v is not None}, key=str)
    return alpha_of(coincidences(units, values))


# --- intervals -----------------------------------------------------------------------------

def _runs_weights(runs: int, seed: int) -> np.ndarray:
    """(RESAMPLES × runs): how often each run is drawn in each resample."""
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, runs, size=(RESAMPLES, runs))
    return np.stack([np.bincount(row, minlength=runs) for row in drawn]).astype(float)


def alpha_interval(per_run: list[np.ndarray], seed: int = 0, alpha: float = ALPHA
                   ) -> list[float | None]:
    """A percentile bootstrap interval for alpha, resampling whole runs (each run's
    coincidence matrix is summed as often as the run is drawn)."""
    if len(per_run) < 2:
        return [None, None]
    stacked = np.stack(per_run)  # runs × k × k
    draws = np.einsum("br,rij->bij", _runs_weights(len(per_run), seed), stacked)
    values = [a for a in (alpha_of(d) for d in draws) if a is not None]
    if len(values) < RESAMPLES / 2:  # mostly undefined: no honest interval
        return [None, None]
    low, high = np.percentile(values, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return [round(float(low), 4), round(float(high), 4)]


def rate(hits: dict[str, list[bool]], alpha: float = ALPHA) -> dict[str, Any]:
    """A rate over votes clustered by run: its value, n, and the cluster Wilson interval."""
    passes = np.array([sum(v) for v in hits.values()], float)
    trials = np.array([len(v) for v in hits.values()], float)
    n = int(trials.sum())
    if n == 0:
        return {"value": None, "ci": [None, None], "n": 0}
    low, high = wilson_cluster(passes, trials, alpha)
    return {"value": round(float(passes.sum() / n), 4),
            "ci": [round(float(low), 4), round(float(high), 4)], "n": n}


def newcombe(first: dict[str, Any], second: dict[str, Any]) -> list[float | None]:
    """Newcombe's hybrid score interval for a difference of two rates (method 10), from
    each rate's own interval."""
    p1, (l1, u1) = first["value"], first["ci"]
    p2, (l2, u2) = second["value"], second["ci"]
    if p1 is None or p2 is None:
        return [None, None]
    d = p1 - p2
    return [round(d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), 4),
            round(d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2), 4)]


# --- the judges ----------------------------------------------------------------------------

def _value(vote: str) -> str | None:
    return vote if vote in VALUES else None  # "none": no value


def judges(votes: list[dict[str, Any]], seed: int = 0) -> dict[str, Any]:
    """Every judge's calibration, and the panel's alpha, from the ledger's vote rows."""
    counted = [v for v in votes if v["eligible"]]
    by_finding: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for v in counted:
        by_finding[(v["run_id"], v["finding"])][v["judge"]] = v["vote"]
    units: dict[str, list[list[str | None]]] = defaultdict(list)
    for (run, _), cast in by_finding.items():
        units[run].append([_value(x) for x in cast.values()])
    runs = sorted(units)
    panel = {r: coincidences(units[r], VALUES) for r in runs}
    out = []
    for judge in sorted({v["judge"] for v in counted}):
        mine = [v for v in counted if v["judge"] == judge]
        pairs: dict[str, list[list[str | None]]] = defaultdict(list)
        first: dict[str, list[bool]] = defaultdict(list)
        second: dict[str, list[bool]] = defaultdict(list)
        sided: dict[str, list[bool]] = defaultdict(list)
        for v in mine:
            run = v["run_id"]
            others = Counter(_value(x) for j, x in by_finding[(run, v["finding"])].items()
                             if j != judge and _value(x) is not None)
            top = others.most_common(2)
            if _value(v["vote"]) is not None and top and (len(top) == 1 or
                                                          top[0][1] > top[1][1]):
                pairs[run].append([_value(v["vote"]), top[0][0]])
            middle = (v["shown"] - 1) / 2
            if v["shown"] > 1 and v["position"] != middle:
                (first if v["position"] < middle else second)[run].append(v["vote"] == "agree")
            if v["tier"] in SIDE:
                sided[run].append((_value(v["vote"]) or "neutral") == SIDE[v["tier"]])
        per_run = [coincidences(pairs[r], VALUES) for r in sorted(pairs)]
        total = sum(per_run) if per_run else np.zeros((3, 3))
        early, late = rate(first), rate(second)
        bias = None if early["value"] is None or late["value"] is None else \
            round(early["value"] - late["value"], 4)
        out.append({
            "judge": judge, "runs": len({v["run_id"] for v in mine}), "votes": len(mine),
            "voted": sum(1 for v in mine if _value(v["vote"]) is not None),
            "alpha": {"value": _round(alpha_of(total)), "ci": alpha_interval(per_run, seed),
                      "units": sum(len(p) for p in pairs.values())},
            "position_bias": {"value": bias, "ci": newcombe(early, late),
                              "first_half": early, "second_half": late},
            "tier_agreement": rate(sided)})
    total = sum(panel.values()) if panel else np.zeros((3, 3))
    return {"runs": len(runs), "votes": len(counted), "judges": out,
            "panel": {"alpha": _round(alpha_of(total)),
                      "ci": alpha_interval(list(panel.values()), seed),
                      "units": sum(1 for cast in by_finding.values()
                                   if sum(_value(x) is not None for x in cast.values()) > 1)}}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
