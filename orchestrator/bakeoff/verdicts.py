"""What a comparison lets a user conclude: ``better``, ``worse`` or ``inconclusive``, and for
an ensemble against its best member the words a user can act on, with about how many tasks
an inconclusive one would need. Pure functions of the statistics' numbers
(:mod:`orchestrator.bakeoff.stats` computes them)."""

from __future__ import annotations

import math
from statistics import NormalDist

ALPHA = 0.05
POWER = 0.80
VERSUS_WORDS = {"better": "beats its best member", "worse": "worse than its best member"}


def verdict(p_holm: float, low: float, high: float, alpha: float = ALPHA) -> str:
    """better/worse only when the adjusted p clears alpha AND the interval excludes 0."""
    if p_holm < alpha and low > 0:
        return "better"
    if p_holm < alpha and high < 0:
        return "worse"
    return "inconclusive"


def tasks_needed(wins: int, losses: int, ties: int, alpha: float = ALPHA,
                 power: float = POWER) -> int | None:
    """About how many tasks the paired sign test needs to detect the difference seen, with
    ``power`` at two-sided ``alpha`` (Noether 1987: ``(z₁₋α/₂ + z_power)² / (4 (q − ½)²)``
    untied tasks, q = wins / (wins + losses), over the share of tasks that were not tied).
    None when no difference was seen (wins = losses): no size would show one."""
    untied = wins + losses
    n = untied + ties
    if untied == 0 or wins == losses:
        return None
    q = wins / untied
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return math.ceil(z * z / (4 * (q - 0.5) ** 2) / (untied / n))


def versus_verdict(p_holm: float, low: float | None, high: float | None, wins: int,
                   losses: int, ties: int, family: int, alpha: float = ALPHA
                   ) -> tuple[str, int | None]:
    """What a user can act on about an ensemble and its best member: ``better``, ``worse``
    (the Holm-adjusted sign test and the Δ interval agree), or ``inconclusive`` with about
    how many tasks would settle it, planned at ``alpha / family`` (Holm's strictest step:
    ``family`` ensembles are compared at once)."""
    word = "inconclusive" if low is None else verdict(p_holm, low, high, alpha)
    if word != "inconclusive":
        return word, None
    return word, tasks_needed(wins, losses, ties, alpha / max(family, 1))
