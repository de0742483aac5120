"""Paired statistics on partial runs (issue 29 item 1): every Δ, its interval, W/L/T and the
p-value use only the tasks both contestants have trials for, checked against scipy on
hand-built partial runs (an interrupted run, exclusions, a slower contestant)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special
from scipy import stats as sps

from orchestrator.bakeoff import report, stats


def run_of(name, outcomes, **extra):
    """outcomes: {task: [bool, ...]} -> trial dicts (an empty list: no trial of that task)."""
    return [{"contestant": name, "task": t, "passed": p, "status": "complete", **extra}
            for t, ps in outcomes.items() for p in ps]


def interrupted_run():
    """The run from the issue: 'base' finished 7 tasks before the interrupt; 'agent' (run
    after it, task by task) only 4, on which the two tie. Unpaired, agent looked +14."""
    tasks = [f"t{i}" for i in range(1, 31)]
    base = {"t1": [True] * 3, "t2": [True] * 3, "t3": [False] * 3, "t4": [False] * 3,
            "t5": [False] * 3, "t6": [False] * 3, "t7": [False, False, True]}
    agent = {"t1": [True] * 3, "t2": [True] * 3, "t3": [False] * 3, "t4": [False] * 3}
    bad = {t: [False] * 3 for t in list(base)[:5]}
    return tasks, run_of("base", base) + run_of("agent", agent) + run_of("bad", bad), \
        {"base": base, "agent": agent, "bad": bad}


def slower_contestant():
    """A slower contestant: 'b' finished 9 of 12 tasks, with 2 trials on one of them."""
    rng = np.random.default_rng(11)
    tasks = [f"t{i}" for i in range(12)]
    a = {t: list(rng.random(3) < 0.5) for t in tasks}
    b = {t: list(rng.random(3) < 0.7) for t in tasks[:9]}
    b["t8"] = b["t8"][:2]
    return tasks, run_of("a", a) + run_of("b", b), {"a": a, "b": b}


def exclusions():
    """Ceiling exclusions scattered over both contestants."""
    rng = np.random.default_rng(5)
    tasks = [f"t{i}" for i in range(20)]
    a = {t: list(rng.random(3) < 0.6) for t in tasks}
    b = {t: list(rng.random(3) < 0.4) for t in tasks}
    trials = run_of("a", a) + run_of("b", b)
    for trial in trials:  # every trial of a few tasks excluded, per contestant
        if (trial["contestant"] == "a" and trial["task"] in ("t3", "t7")) or \
                (trial["contestant"] == "b" and trial["task"] in ("t7", "t12", "t19")):
            trial["excluded"] = "not launched: the cost ceiling"
    for t in ("t3", "t7"):
        a[t] = []
    for t in ("t7", "t12", "t19"):
        b[t] = []
    return tasks, trials, {"a": a, "b": b}


CASES = {"interrupted": interrupted_run, "slower": slower_contestant, "excluded": exclusions}


def paired_reference(outcomes, base, other):
    """scipy's view: per-task pass rates on the shared tasks, their difference."""
    shared = [t for t in outcomes[base] if outcomes[base][t] and outcomes[other].get(t)]
    a = np.array([np.mean(outcomes[base][t]) for t in shared])
    b = np.array([np.mean(outcomes[other][t]) for t in shared])
    return shared, a, b


@pytest.mark.parametrize("case", sorted(CASES))
def test_delta_w_l_t_and_p_are_paired_on_shared_tasks(case):
    tasks, trials, outcomes = CASES[case]()
    names = list(outcomes)
    result = stats.analyse(trials, names, tasks, seed=3)
    for cmp in result["comparisons"]:
        shared, a, b = paired_reference(outcomes, names[0], cmp["contestant"])
        assert cmp["tasks"] == len(shared)
        # Δ: pooled rate on the shared tasks (ratio of sums), each side
        pa = sum(sum(outcomes[names[0]][t]) for t in shared) / \
            sum(len(outcomes[names[0]][t]) for t in shared)
        pb = sum(sum(outcomes[cmp["contestant"]][t]) for t in shared) / \
            sum(len(outcomes[cmp["contestant"]][t]) for t in shared)
        assert cmp["delta"] == pytest.approx(pb - pa)
        wins, losses = int((b > a).sum()), int((b < a).sum())
        assert (cmp["wins"], cmp["losses"], cmp["ties"]) == \
            (wins, losses, len(shared) - wins - losses)
        expected_p = 1.0 if wins + losses == 0 else sps.binomtest(wins, wins + losses).pvalue
        assert cmp["p"] == pytest.approx(expected_p)
        if len(shared) >= 5 and np.ptp(b - a) > 0:  # scipy's paired bootstrap on the pairs
            ref = sps.bootstrap((b - a,), np.mean, n_resamples=10_000, method="percentile",
                                confidence_level=1 - 2 * stats.expanded_tail(len(shared)),
                                random_state=np.random.default_rng(1)).confidence_interval
            width = ref.high - ref.low
            assert cmp["delta_ci"][0] == pytest.approx(ref.low, abs=0.25 * width + 0.02)
            assert cmp["delta_ci"][1] == pytest.approx(ref.high, abs=0.25 * width + 0.02)
        low, high = cmp["delta_ci"]
        if low is not None:
            assert low <= cmp["delta"] <= high


def test_the_interrupted_run_from_the_issue():
    tasks, trials, outcomes = interrupted_run()
    result = stats.analyse(trials, ["base", "agent", "bad"], tasks)
    agent, bad = result["comparisons"]
    # unpaired, agent was +14 [+0, +36] and bad -63; paired: 0 (0/0/4) and -69 (2/0... )
    assert agent["delta"] == 0 and (agent["wins"], agent["losses"], agent["ties"]) == (0, 0, 4)
    assert agent["delta_ci"] == [0, 0] and agent["verdict"] == "inconclusive"
    assert bad["tasks"] == 5 and bad["delta"] == pytest.approx(0 - 6 / 15)
    # the MDE counts the tasks graded for every contestant (4), not the 30 planned
    z = sps.norm.ppf(0.975) + sps.norm.ppf(0.8)
    assert result["graded_tasks"] == 4
    assert result["min_detectable"] == pytest.approx(min(1.0, z * math.sqrt(0.5 / 4)))
    note = "\n".join(report.notes({"stats": result}))
    assert "4 of 30 tasks graded for every contestant" in note


def test_minimum_detectable_alone_counts_tasks_with_trials():
    tasks = [f"t{i}" for i in range(30)]
    trials = run_of("a", {t: [True, False] for t in tasks[:14]})
    result = stats.analyse(trials, ["a"], tasks, resamples=200)
    z = sps.norm.ppf(0.975) + sps.norm.ppf(0.8)
    assert result["min_detectable"] == pytest.approx(z * math.sqrt(0.5 / 14))  # ~53, not ~36
    assert round(100 * result["min_detectable"]) == 53


def test_pass_k_never_exceeds_what_its_tasks_say_and_says_how_many():
    # the issue's case: pass 80%, pass^2 100% because the failing tasks had one trial
    outcomes = {"t1": [True, True], "t2": [True, True], "t3": [True, False],
                "t4": [False], "t5": [True, True]}
    trials = run_of("a", outcomes)
    result = stats.analyse(trials, ["a"], list(outcomes), k=2, resamples=200)
    row = result["rows"][0]
    with_k = [(sum(v), len(v)) for v in outcomes.values() if len(v) >= 2]
    expected = np.mean([special.comb(c, 2) / special.comb(n, 2) for c, n in with_k])
    assert row["pass_k"] == pytest.approx(expected)
    assert row["pass_k_tasks"] == 4 and row["tasks"] == 5
    cell = report.tables(result)[0][2][0][2]
    assert cell.endswith("(4 tasks)")


def test_unknown_tokens_are_a_dash_and_a_timed_out_zero_dollar_contestant_is_off_the_front():
    tasks = [f"t{i}" for i in range(6)]
    model = run_of("model", {t: [True, False, True] for t in tasks}, tokens=900,
                   cost_usd=0.002)
    silent = run_of("silent", {t: [True, True, False] for t in tasks}, tokens=None,
                    cost_usd=0.001)
    dead = [{**r, "status": "error", "reason": "timeout"} for r in
            run_of("dead", {t: [False] * 3 for t in tasks}, tokens=0, cost_usd=0.0)]
    result = stats.analyse(model + silent + dead, ["model", "silent", "dead"], tasks,
                           resamples=300)
    rows = {r["contestant"]: r for r in result["rows"]}
    assert rows["silent"]["tok_per_solved"]["value"] is None
    assert rows["silent"]["tok_per_solved"]["delta"] is None
    silent_cmp = result["comparisons"][0]
    assert silent_cmp["delta_tok_per_solved"] is None
    main, vs = report.tables(result)[:2]
    assert main[2][1][3] == "—"  # tok/solved of silent
    assert vs[2][0][5] == "—"  # its Δ tok/solved, not −2,750
    assert not rows["dead"]["pareto"] and "dead" not in result["pareto"]
    # before: a $0 contestant that only timed out sat on the front
    assert stats.pareto_front({"dead": (None, 0.0), "m": (0.5, 0.01)}) == {"m"}


def test_a_contestant_with_no_valid_trials_is_off_the_front_and_its_numbers_are_unknown():
    tasks = ["t1", "t2"]
    trials = run_of("a", {"t1": [True], "t2": [False]}, cost_usd=0.01) + \
        [{"contestant": "b", "task": "t1", "passed": False, "excluded": "set-up failed",
          "cost_usd": 0.0}]
    result = stats.analyse(trials, ["a", "b"], tasks, resamples=200)
    b = result["rows"][1]
    assert b["pass"]["value"] is None and not b["pareto"] and b["trials"] == 0
    assert result["comparisons"][0]["tasks"] == 0
    assert result["comparisons"][0]["delta"] is None
    assert result["comparisons"][0]["verdict"] == "inconclusive"
    assert report.tables(result)[0][2][1][1].startswith("—")
