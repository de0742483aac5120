"""The bake-off statistics against scipy and against cases worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special
from scipy import stats as sps

from orchestrator.bakeoff import stats


def trials_of(name, outcomes, **extra):
    """outcomes: {task: [bool, ...]} -> trial dicts."""
    return [{"contestant": name, "task": t, "passed": p, **extra}
            for t, ps in outcomes.items() for p in ps]


# --- hand-worked ---------------------------------------------------------------------------

def test_holm_on_a_known_vector():
    # sorted 0.005, 0.01, 0.03, 0.04 -> ×4, ×3, ×2, ×1 = 0.02, 0.03, 0.06, 0.04 -> monotone
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.9]) == [1.0, 1.0]
    assert stats.holm([]) == []


def test_sign_test_by_hand():
    assert stats.sign_test(8, 2) == pytest.approx(2 * (1 + 10 + 45) / 1024)  # 0.109375
    assert stats.sign_test(10, 0) == pytest.approx(2 / 1024)
    assert stats.sign_test(3, 3) == 1.0
    assert stats.sign_test(0, 0) == 1.0


def test_pass_hat_k_by_hand():
    assert stats.pass_hat_k(2, 3, 2) == pytest.approx(1 / 3)  # C(2,2)/C(3,2)
    assert stats.pass_hat_k(3, 3, 3) == 1.0
    assert stats.pass_hat_k(2, 3, 3) == 0.0
    assert stats.pass_hat_k(1, 1, 2) is None  # fewer trials than k
    # tasks (3/3, 2/3, 0/3) at k=2: (1 + 1/3 + 0) / 3
    assert stats.pass_k([(3, 3), (2, 3), (0, 3)], 2) == pytest.approx(4 / 9)


def test_verdict_needs_both_the_p_value_and_the_interval():
    assert stats.verdict(0.01, 0.1, 0.3) == "better"
    assert stats.verdict(0.01, -0.3, -0.1) == "worse"
    assert stats.verdict(0.01, -0.1, 0.3) == "inconclusive"  # interval straddles 0
    assert stats.verdict(0.2, 0.1, 0.3) == "inconclusive"  # p too large


def test_pareto_front_by_hand():
    points = {"cheap-weak": (0.3, 0.01), "dear-strong": (0.9, 0.10),
              "dominated": (0.5, 0.20), "unknown": (1.0, None), "mid": (0.6, 0.05)}
    assert stats.pareto_front(points) == {"cheap-weak", "dear-strong", "mid"}


def test_minimum_detectable_difference():
    z = sps.norm.ppf(0.975) + sps.norm.ppf(0.8)
    assert stats.minimum_detectable(13) == pytest.approx(z * math.sqrt(0.5 / 13))
    assert stats.minimum_detectable(500) == pytest.approx(0.0886, abs=1e-3)
    assert stats.minimum_detectable(0) is None
    assert stats.minimum_detectable(1) == 1.0  # capped


# --- against scipy -------------------------------------------------------------------------

@given(st.integers(0, 60), st.integers(0, 60))
@settings(max_examples=200, deadline=None)
def test_sign_test_matches_scipy(wins, losses):
    expected = 1.0 if wins + losses == 0 else \
        sps.binomtest(wins, wins + losses, 0.5, alternative="two-sided").pvalue
    assert stats.sign_test(wins, losses) == pytest.approx(expected, rel=1e-9)


@given(st.integers(1, 20).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n),
                                                     st.integers(1, n))))
def test_pass_hat_k_matches_scipy_comb(case):
    c, n, k = case
    assert stats.pass_hat_k(c, n, k) == pytest.approx(
        special.comb(c, k, exact=True) / special.comb(n, k, exact=True))


def test_bootstrap_interval_agrees_with_scipy_percentile_bootstrap():
    """Metrics other than the pass rate: the cluster bootstrap, its percentile interval
    widened to a t interval's width on few tasks (the tail :func:`stats.expanded_tail`)."""
    rng = np.random.default_rng(7)
    steps = rng.integers(1, 9, size=40).astype(float)
    trials = [{"contestant": "a", "task": f"t{i}", "passed": True, "steps": s}
              for i, s in enumerate(steps)]
    result = stats.analyse(trials, ["a"], [f"t{i}" for i in range(40)], seed=1)
    ours = result["rows"][0]["steps"]
    level = 1 - 2 * stats.expanded_tail(40)
    ref = sps.bootstrap((steps,), np.mean, n_resamples=10_000, method="percentile",
                        confidence_level=level,
                        random_state=np.random.default_rng(2)).confidence_interval
    assert ours["value"] == pytest.approx(steps.mean())
    assert ours["ci"][0] == pytest.approx(ref.low, abs=0.1)
    assert ours["ci"][1] == pytest.approx(ref.high, abs=0.1)


def test_pass_rate_interval_is_the_cluster_wilson_interval():
    rng = np.random.default_rng(7)
    passes = rng.binomial(3, rng.beta(2, 3, size=40))
    outcomes = {f"t{i}": [j < c for j in range(3)] for i, c in enumerate(passes)}
    ours = stats.analyse(trials_of("a", outcomes), ["a"], list(outcomes), seed=1)
    low, high = stats.wilson_cluster(passes, np.full(40, 3))
    assert ours["rows"][0]["pass"]["ci"] == [pytest.approx(low), pytest.approx(high)]
    assert low < passes.sum() / 120 < high


def test_paired_delta_interval_agrees_with_scipy_paired_bootstrap():
    rng = np.random.default_rng(3)
    a = rng.binomial(1, 0.5, size=60).astype(float)
    b = np.clip(a + rng.binomial(1, 0.3, size=60), 0, 1)
    tasks = [f"t{i}" for i in range(60)]
    trials = trials_of("a", {t: [bool(x)] for t, x in zip(tasks, a, strict=True)}) + \
        trials_of("b", {t: [bool(x)] for t, x in zip(tasks, b, strict=True)})
    result = stats.analyse(trials, ["a", "b"], tasks, seed=4)
    cmp = result["comparisons"][0]
    ref = sps.bootstrap((b - a,), np.mean, n_resamples=10_000, method="percentile",
                        confidence_level=1 - 2 * stats.expanded_tail(60),
                        random_state=np.random.default_rng(5)).confidence_interval
    assert cmp["delta"] == pytest.approx((b - a).mean())
    assert cmp["delta_ci"][0] == pytest.approx(ref.low, abs=0.02)
    assert cmp["delta_ci"][1] == pytest.approx(ref.high, abs=0.02)
    wins, losses = int((b > a).sum()), int((b < a).sum())
    assert (cmp["wins"], cmp["losses"], cmp["ties"]) == (wins, losses, 60 - wins - losses)
    assert cmp["p"] == pytest.approx(sps.binomtest(wins, wins + losses).pvalue)


# --- the whole analysis --------------------------------------------------------------------

def test_analysis_orders_verdicts_and_keeps_the_seed():
    tasks = [f"t{i}" for i in range(20)]
    always = trials_of("base", {t: [True] * 3 for t in tasks})
    never = trials_of("never", {t: [False] * 3 for t in tasks})
    same = trials_of("same", {t: [True] * 3 for t in tasks})
    half = trials_of("half", {t: [i % 2 == 0] * 3 for i, t in enumerate(tasks)})
    result = stats.analyse(always + never + same + half, ["base", "never", "same", "half"],
                           tasks)
    verdicts = {c["contestant"]: c["verdict"] for c in result["comparisons"]}
    assert verdicts == {"never": "worse", "same": "inconclusive", "half": "worse"}
    never_row = result["comparisons"][0]
    assert (never_row["wins"], never_row["losses"], never_row["ties"]) == (0, 20, 0)
    assert never_row["p_holm"] == pytest.approx(min(1, 3 * 2 / 2**20))
    assert result["rows"][3]["pass"]["value"] == 0.5
    assert result["rows"][0]["pass_k"] == 1.0 and result["rows"][3]["pass_k"] == 0.5
    assert stats.analyse(always + half, ["base", "half"], tasks, seed=9) == \
        stats.analyse(always + half, ["base", "half"], tasks, seed=9)


def test_excluded_trials_are_not_counted_and_unknown_cost_is_not_guessed():
    trials = [
        {"contestant": "a", "task": "t1", "passed": True, "cost_usd": 0.01, "tokens": 100},
        {"contestant": "a", "task": "t1", "passed": False, "excluded": "setup failed"},
        {"contestant": "b", "task": "t1", "passed": True, "cost_usd": None, "tokens": 50},
    ]
    result = stats.analyse(trials, ["a", "b"], ["t1"], resamples=200)
    a, b = result["rows"]
    assert a["trials"] == 1 and a["pass"]["value"] == 1.0
    assert a["cost_per_solved"]["value"] == pytest.approx(0.01)
    assert b["cost_per_trial"]["value"] is None and b["tok_per_solved"]["value"] == 50
    assert result["pareto"] == ["a"]
    assert any("1 trial" in w for w in result["warnings"])


def test_metric_ratios_and_their_deltas():
    trials = trials_of("a", {"t1": [True, False], "t2": [True, True]}, tokens=100, secs=2.0,
                       steps=3, input_tokens=80, cached_tokens=20, cost_usd=0.5)
    trials += trials_of("b", {"t1": [True, True], "t2": [True, True]}, tokens=50, secs=1.0,
                        steps=1, input_tokens=40, cached_tokens=0, cost_usd=0.1)
    rows = stats.analyse(trials, ["a", "b"], ["t1", "t2"], resamples=500)["rows"]
    a, b = rows
    assert a["tok_per_solved"]["value"] == pytest.approx(400 / 3)
    assert a["cache_share"]["value"] == pytest.approx(0.25)
    assert a["steps"]["value"] == 3 and a["secs"]["value"] == 2.0
    assert a["cost_per_solved"]["value"] == pytest.approx(2.0 / 3)
    assert b["tok_per_solved"]["delta"] == pytest.approx(50 - 400 / 3)
    assert b["secs"]["delta_ci"][1] == pytest.approx(-1.0)


@pytest.mark.parametrize("tasks", [10, 13, 30, 100])
def test_coverage_of_the_95_percent_interval(tasks):
    """4,000 simulated benches per task difficulty: the interval covers the true rate
    93-97% of the time at every size from 10 tasks (the percentile bootstrap it replaced
    gave 88-92% at 13)."""
    for a, b in ((4, 1), (8, 1), (2, 2), (1, 1)):
        got = stats.coverage(benches=4000, tasks=tasks, trials=3, a=a, b=b, seed=tasks)
        assert 0.93 <= got <= 0.97, (tasks, a, b, got)


def test_below_the_measured_size_the_report_says_approximate():
    outcomes = {f"t{i}": [i % 2 == 0] * 3 for i in range(9)}
    result = stats.analyse(trials_of("a", outcomes), ["a"], list(outcomes), resamples=200)
    assert any("approximate" in w for w in result["warnings"])
    outcomes = {f"t{i}": [i % 2 == 0] * 3 for i in range(10)}
    result = stats.analyse(trials_of("a", outcomes), ["a"], list(outcomes), resamples=200)
    assert not any("approximate" in w for w in result["warnings"])


@pytest.mark.parametrize("df", [1, 2, 3, 5, 9, 12, 29, 99])
def test_t_quantile_matches_scipy(df):
    assert stats.t_quantile(0.975, df) == pytest.approx(sps.t.ppf(0.975, df), rel=2e-3)


def test_wilson_cluster_is_wilson_when_tasks_are_single_trials():
    """One trial per task: no clustering, so it is the textbook Wilson interval."""
    passes = np.array([1.0] * 14 + [0.0] * 6)
    low, high = stats.wilson_cluster(passes, np.ones(20))
    ref = sps.binomtest(14, 20).proportion_ci(method="wilson")
    eff_is_n = float(low) == pytest.approx(ref.low, abs=0.01)
    assert eff_is_n and float(high) == pytest.approx(ref.high, abs=0.01)


# --- an ensemble against its best member: the verdict line ----------------------------------

def sign_test_power(tasks: int, untied_share: float, q: float, alpha: float) -> float:
    """The exact power of the two-sided sign test on ``tasks`` paired tasks, computed here
    from scipy's binomial distribution: each task is untied with ``untied_share``, an untied
    one a win with ``q``; the test rejects where scipy's binomial test p < alpha."""
    power = 0.0
    for k in range(1, tasks + 1):
        w = np.arange(k + 1)
        p = np.minimum(1.0, 2 * np.minimum(sps.binom.cdf(w, k, 0.5), sps.binom.sf(w - 1, k, 0.5)))
        reject = p < alpha
        power += sps.binom.pmf(k, tasks, untied_share) * sps.binom.pmf(w, k, q)[reject].sum()
    return power


@pytest.mark.parametrize("wins,losses,ties,family", [(3, 0, 9, 1), (5, 2, 13, 1),
                                                     (8, 3, 9, 2), (2, 1, 30, 1)])
def test_tasks_needed_gives_about_80_percent_power_by_an_exact_computation(wins, losses, ties,
                                                                           family):
    """"needs about N tasks": at N the exact sign test (scipy's binomial) detects the
    difference seen about 80% of the time at Holm's strictest level, and at half of N it
    would usually miss it."""
    alpha = stats.ALPHA / family
    n = stats.tasks_needed(wins, losses, ties, alpha)
    share, q = (wins + losses) / (wins + losses + ties), wins / (wins + losses)
    assert 0.70 <= sign_test_power(n, share, q, alpha) <= 0.90, n
    assert sign_test_power(n // 2, share, q, alpha) < 0.65
    _, needs = stats.versus_verdict(1.0, -0.1, 0.3, wins, losses, ties, family)
    assert needs == n
    assert stats.tasks_needed(4, 4, 3) is None and stats.tasks_needed(0, 0, 5) is None


def ensemble_trials(rates: dict[str, list[bool]]) -> list[dict]:
    """One trial per task per contestant: {contestant: [passed per task]}."""
    return [{"contestant": c, "task": f"t{i}", "passed": p, "cost_usd": 0.01}
            for c, ps in rates.items() for i, p in enumerate(ps)]


def test_each_ensemble_gets_a_holm_adjusted_verdict_against_its_best_member():
    n = 30
    rates = {"a": [i < 10 for i in range(n)], "b": [i < 10 for i in range(n)],  # tied
             "c": [i < 5 for i in range(n)],
             "strong": [i < 28 for i in range(n)],  # 18 wins, 0 losses over a
             "weak": [i < 2 for i in range(n)],  # 0 wins, 8 losses
             "same": [i < 10 or i == 29 for i in range(n)]}  # 1 win, 0 losses
    ensembles = {"strong": ["a", "b", "c"], "weak": ["a", "c"], "same": ["a", "b"]}
    result = stats.analyse(ensemble_trials(rates), list(rates), [f"t{i}" for i in range(n)],
                           ensembles=ensembles, resamples=2000)
    got = {e["contestant"]: e for e in result["ensembles"]}
    # scipy's sign tests, Holm-adjusted across the three ensembles by hand
    raw = {"strong": sps.binomtest(18, 18).pvalue, "weak": sps.binomtest(0, 8).pvalue,
           "same": sps.binomtest(1, 1).pvalue}
    order = sorted(raw, key=raw.get)
    adjusted, running = {}, 0.0
    for rank, name in enumerate(order):
        running = max(running, min(1.0, (3 - rank) * raw[name]))
        adjusted[name] = running
    for name in raw:
        assert got[name]["p"] == pytest.approx(raw[name])
        assert got[name]["p_holm"] == pytest.approx(adjusted[name])
    assert got["strong"]["best_member"] == "a" and got["strong"]["tied"] == ["b"]
    assert got["weak"]["tied"] == []
    assert (got["strong"]["verdict"], got["weak"]["verdict"], got["same"]["verdict"]) == \
        ("better", "worse", "inconclusive")
    assert got["same"]["needs_tasks"] == stats.tasks_needed(1, 0, 29, stats.ALPHA / 3)
    from orchestrator.bakeoff.report import ensemble_lines

    settings = {"contestants": [{"name": c, "kind": "model"} for c in rates]}
    lines = ensemble_lines({"stats": result, "settings": settings})
    assert lines[0].startswith("strong vs best member (a; tied with b): Δ +60")
    assert lines[0].endswith(": beats its best member")
    assert lines[1].endswith(": worse than its best member")
    assert lines[2].endswith(f": inconclusive at this size (needs about "
                             f"{got['same']['needs_tasks']} tasks)")
    assert f"p {raw['same']:.3g} (Holm {adjusted['same']:.3g})" in lines[2]


def test_a_delta_of_equal_costs_is_zero_not_float_dust():
    """Before, the Δ interval of two contestants with the same costs printed `+$3.39e-21`."""
    from orchestrator.bakeoff.report import tables

    costs = [2.7e-05, 0.1, 0.3, 0.3, 0.3, 1.3e-05]
    # the same dollars reached another way (an ensemble sums its members): 0.1 and
    # 0.10000000000000002 apart in the last bit
    other = [(c * 0.1) * 10 if i % 2 else c for i, c in enumerate(costs)]
    assert other != costs
    trials = [{"contestant": name, "task": f"t{i}", "passed": True, "cost_usd": cost}
              for name, cs in (("a", costs), ("b", other)) for i, cost in enumerate(cs)]
    result = stats.analyse(trials, ["a", "b"], [f"t{i}" for i in range(6)], resamples=300)
    b = result["rows"][1]
    assert b["cost_per_trial"]["delta"] == 0.0 and b["cost_per_trial"]["delta_ci"] == [0, 0]
    printed = "\n".join(" ".join(r) for _, _, rows in tables(result) for r in rows)
    assert "e-" not in printed and "+$0.0000 [+$0.0000, +$0.0000]" in printed
