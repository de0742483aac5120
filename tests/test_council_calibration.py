"""Judge calibration (issue 41 item 6), `orch council stats --judges`: each judge's agreement
with the others (Krippendorff's alpha), its position bias across its own shuffled view, and
its agreement with the final tier, with intervals; read from the judges' votes each council
run now leaves in the ledger. Checked against a published worked example, the
`krippendorff` package and scipy, and end to end through a real council run."""

from __future__ import annotations

import json
import math
import re

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from test_council_run import council, run_council, script_bench

from orchestrator.council import calibration as cal
from orchestrator.ledger.council_rows import CouncilLedger

NAN = float("nan")


def test_alpha_on_krippendorffs_published_example():
    """Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the 4 coders ×
    12 units example with missing values: nominal alpha = 0.743."""
    data = [[1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
            [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN]]
    units = [[None if math.isnan(row[u]) else row[u] for row in data] for u in range(12)]
    assert round(cal.alpha_nominal(units), 3) == 0.743
    assert cal.alpha_nominal([["a", "a"], ["b", "b"]]) == 1.0
    assert cal.alpha_nominal([["a", "a"], ["a", "a"]]) is None  # no variation: undefined
    assert cal.alpha_nominal([["a", None]]) is None  # nothing pairable


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["agree", "dispute", "neutral", None]),
                         min_size=4, max_size=4), min_size=3, max_size=25))
def test_alpha_matches_the_krippendorff_package(units):
    ours = cal.alpha_nominal(units)
    code = {"agree": 0, "dispute": 1, "neutral": 2}
    data = np.array([[NAN if u[c] is None else code[u[c]] for u in units] for c in range(4)])
    try:
        theirs = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    except ValueError:  # one value in the domain: undefined there too
        theirs = None
    if theirs is None or math.isnan(theirs):
        assert ours is None or not math.isfinite(ours)
    else:
        assert ours == pytest.approx(theirs, abs=1e-9)


def synthetic_votes(runs: int = 30, seed: int = 7) -> list[dict]:
    """Three judges over ``runs`` councils of 6 findings each: "kind" agrees more with
    findings shown early, "fair" follows the truth, "noisy" guesses."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(runs):
        truth = rng.choice(["agree", "dispute", "neutral"], size=6, p=[0.5, 0.3, 0.2])
        tiers = {"agree": "confirmed", "dispute": "disputed", "neutral": "singleton"}
        for judge in ("fair", "kind", "noisy"):
            order = rng.permutation(6)
            for position, f in enumerate(order):
                if judge == "fair":
                    vote = truth[f] if rng.random() < 0.85 else rng.choice(["agree", "none"])
                elif judge == "kind":
                    vote = "agree" if position < 3 and rng.random() < 0.7 else truth[f]
                else:
                    vote = rng.choice(["agree", "dispute", "neutral", "none"])
                rows.append({"run_id": f"r{r}", "judge": judge, "finding": f"F{f + 1}",
                             "grp": f"G{f + 1}", "position": position, "shown": 6,
                             "vote": str(vote), "tier": tiers[truth[f]] if f else "contested",
                             "eligible": not (judge == "noisy" and f == 5)})
    return rows


def test_each_judges_numbers_match_an_independent_computation():
    votes = synthetic_votes()
    doc = cal.judges(votes)
    by = {j["judge"]: j for j in doc["judges"]}
    assert sorted(by) == ["fair", "kind", "noisy"] and doc["runs"] == 30
    counted = [v for v in votes if v["eligible"]]
    for name, j in by.items():
        mine = [v for v in counted if v["judge"] == name]
        # alpha: the krippendorff package on (this judge, the others' majority), two coders
        pairs = []
        for v in mine:
            others = [o["vote"] for o in counted if o["run_id"] == v["run_id"] and
                      o["finding"] == v["finding"] and o["judge"] != name and
                      o["vote"] != "none"]
            if v["vote"] == "none" or not others:
                continue
            counts = sorted(((others.count(x), x) for x in set(others)), reverse=True)
            if len(counts) > 1 and counts[0][0] == counts[1][0]:
                continue  # the others tie: no majority
            pairs.append((v["vote"], counts[0][1]))
        code = {"agree": 0, "dispute": 1, "neutral": 2}
        data = np.array([[code[a] for a, _ in pairs], [code[b] for _, b in pairs]], float)
        assert j["alpha"]["units"] == len(pairs)
        assert j["alpha"]["value"] == pytest.approx(
            krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"),
            abs=1e-4)
        # agreement with the final tier, counted by hand
        side = {"confirmed": "agree", "disputed": "dispute", "singleton": "neutral"}
        sided = [v for v in mine if v["tier"] in side]
        hits = sum((v["vote"] if v["vote"] != "none" else "neutral") == side[v["tier"]]
                   for v in sided)
        assert j["tier_agreement"]["n"] == len(sided)
        assert j["tier_agreement"]["value"] == pytest.approx(hits / len(sided), abs=1e-4)
        # position bias: first half (positions 0-2) less second half (3-5)
        early = [v["vote"] == "agree" for v in mine if v["position"] < 3]
        late = [v["vote"] == "agree" for v in mine if v["position"] > 2]
        assert j["position_bias"]["value"] == pytest.approx(
            np.mean(early) - np.mean(late), abs=1e-3)
    assert by["kind"]["position_bias"]["ci"][0] > 0  # it does favour the first findings
    assert by["fair"]["position_bias"]["ci"][0] < 0 < by["fair"]["position_bias"]["ci"][1]
    assert by["fair"]["tier_agreement"]["value"] > by["noisy"]["tier_agreement"]["value"]


def test_newcombes_interval_from_scipys_wilson_intervals():
    """One vote per run: the cluster Wilson interval is the textbook one (scipy), and the
    difference's interval is Newcombe's method 10 over the two."""
    first = {f"r{i}": [i < 14] for i in range(20)}
    second = {f"r{i}": [i < 6] for i in range(20)}
    a, b = cal.rate(first), cal.rate(second)
    wa = sps.binomtest(14, 20).proportion_ci(method="wilson")
    wb = sps.binomtest(6, 20).proportion_ci(method="wilson")
    assert a["ci"] == pytest.approx([wa.low, wa.high], abs=0.01)
    low = 0.4 - math.sqrt((0.7 - wa.low) ** 2 + (wb.high - 0.3) ** 2)
    high = 0.4 + math.sqrt((wa.high - 0.7) ** 2 + (0.3 - wb.low) ** 2)
    assert cal.newcombe(a, b) == pytest.approx([low, high], abs=0.015)


def test_the_alpha_interval_agrees_with_scipys_bootstrap_over_runs():
    """Resampling whole runs, with scipy's bootstrap and the krippendorff package doing the
    work: the two percentile intervals agree within Monte Carlo error."""
    votes = synthetic_votes(runs=24, seed=3)
    doc = cal.judges(votes)
    fair = next(j for j in doc["judges"] if j["judge"] == "fair")
    runs = sorted({v["run_id"] for v in votes})
    counted = [v for v in votes if v["eligible"]]

    def alpha_of(sample):
        pairs = []
        for k in np.asarray(sample, int):
            run = runs[k]
            here = [v for v in counted if v["run_id"] == run]
            for v in here:
                if v["judge"] != "fair" or v["vote"] == "none":
                    continue
                others = [o["vote"] for o in here if o["finding"] == v["finding"] and
                          o["judge"] != "fair" and o["vote"] != "none"]
                if not others or (len(set(others)) == 2 and len(others) == 2):
                    continue
                pairs.append((v["vote"], max(set(others), key=others.count)))
        code = {"agree": 0, "dispute": 1, "neutral": 2}
        data = np.array([[code[a] for a, _ in pairs], [code[b] for _, b in pairs]], float)
        return krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")

    ref = sps.bootstrap((np.arange(len(runs), dtype=float),), alpha_of, vectorized=False,
                        n_resamples=1000, method="percentile",
                        random_state=np.random.default_rng(1)).confidence_interval
    low, high = fair["alpha"]["ci"]
    assert abs(low - ref.low) < 0.06 and abs(high - ref.high) < 0.06, (low, high, ref)


def test_a_council_run_leaves_its_judges_votes_and_stats_judges_reads_them(
        orch, scripted_server, orch_home):
    """End to end: the votes in the ledger are exactly what each judge's parsed judgement
    holds, at the positions its own prompt showed, with the final tiers; `--judges` reports
    them, as a table and as JSON."""
    orch.provider()
    script_bench(scripted_server)
    result, doc = run_council()
    assert result.exit_code == 0, result.output
    run_dir = orch_home / "runs" / f"council-{doc['run_id']}"
    tally = json.loads((run_dir / "tally.json").read_text())
    expected = set()
    for judged in sorted((run_dir / "judgements").glob("*.json")):
        parsed = json.loads(judged.read_text())
        shown = re.findall(r"^- (F\d+) · ", (judged.with_suffix(".prompt.md")).read_text(),
                           re.M)
        cast = {v["finding"]: v["vote"] for v in parsed["votes"]}
        seats = {g["id"]: g["seats"] for g in tally["groups"]}
        for position, fid in enumerate(shown):
            group = tally["findings"][fid]["group"]
            expected.add((parsed["judge"], fid, group, position, len(shown),
                          cast.get(fid, "none"), tally["findings"][fid]["tier"],
                          parsed["judge"] not in seats[group]))
    got = {(v["judge"], v["finding"], v["grp"], v["position"], v["shown"], v["vote"],
            v["tier"], v["eligible"]) for v in CouncilLedger().votes()}
    assert got == expected and len(got) >= 6
    as_json = council("stats", "--judges", "--json")
    assert as_json.exit_code == 0, as_json.output
    stats = json.loads(as_json.stdout)
    assert stats["runs"] == 1 and {j["judge"] for j in stats["judges"]} == {
        "scripted/alpha", "scripted/bravo", "scripted/charlie"}
    table = council("stats", "--judges")
    assert table.exit_code == 0 and "α vs others" in table.stdout
    assert "scripted/bravo" in table.stdout and table.stdout.count("\n") >= 5


def test_stats_judges_with_no_votes(orch):
    result = council("stats", "--judges")
    assert result.exit_code == 0 and "no judges' votes yet" in result.stdout
