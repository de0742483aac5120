"""The tally is a pure function: tiers from votes, street-cred from ranks, self-votes and
self-ranks never counted, similar findings grouped, same input → same output."""

from __future__ import annotations

import itertools
import random

import pytest

from orchestrator.council.tally import CONCURRENCE_LINE, tally, tier

SEATS = ["a", "b", "c", "d"]


def f(fid, seat, claim="the parser drops the last byte of every frame", location="io.py:9",
      severity="major"):
    return {"id": fid, "seat": seat, "severity": severity, "claim": claim, "location": location}


def v(judge, fid, vote, reason="because"):
    return {"judge": judge, "finding": fid, "vote": vote, "reason": reason}


# Every (eligible judges, agree, dispute) up to 5 judges; everyone else is neutral or did not
# vote. Written out by hand from the rules in docs/council.md, not computed.
TIER_TABLE = [
    (0, 0, 0, "singleton"), (1, 0, 0, "singleton"), (1, 0, 1, "disputed"), (1, 1, 0, "confirmed"),
    (2, 0, 0, "singleton"), (2, 0, 1, "singleton"), (2, 0, 2, "disputed"), (2, 1, 0, "singleton"),
    (2, 1, 1, "contested"), (2, 2, 0, "confirmed"), (3, 0, 0, "singleton"), (3, 0, 1, "singleton"),
    (3, 0, 2, "disputed"), (3, 0, 3, "disputed"), (3, 1, 0, "singleton"), (3, 1, 1, "contested"),
    (3, 1, 2, "disputed"), (3, 2, 0, "confirmed"), (3, 2, 1, "contested"), (3, 3, 0, "confirmed"),
    (4, 0, 0, "singleton"), (4, 0, 1, "singleton"), (4, 0, 2, "singleton"), (4, 0, 3, "disputed"),
    (4, 0, 4, "disputed"), (4, 1, 0, "singleton"), (4, 1, 1, "contested"), (4, 1, 2, "contested"),
    (4, 1, 3, "disputed"), (4, 2, 0, "singleton"), (4, 2, 1, "contested"), (4, 2, 2, "contested"),
    (4, 3, 0, "confirmed"), (4, 3, 1, "contested"), (4, 4, 0, "confirmed"), (5, 0, 0, "singleton"),
    (5, 0, 1, "singleton"), (5, 0, 2, "singleton"), (5, 0, 3, "disputed"), (5, 0, 4, "disputed"),
    (5, 0, 5, "disputed"), (5, 1, 0, "singleton"), (5, 1, 1, "contested"), (5, 1, 2, "contested"),
    (5, 1, 3, "disputed"), (5, 1, 4, "disputed"), (5, 2, 0, "singleton"), (5, 2, 1, "contested"),
    (5, 2, 2, "contested"), (5, 2, 3, "disputed"), (5, 3, 0, "confirmed"), (5, 3, 1, "contested"),
    (5, 3, 2, "contested"), (5, 4, 0, "confirmed"), (5, 4, 1, "contested"), (5, 5, 0, "confirmed"),
]
EXPECTED = {(n, a, d): t for n, a, d, t in TIER_TABLE}


def test_the_tier_table_covers_every_count_up_to_five_judges():
    assert set(EXPECTED) == {(n, a, d) for n in range(6) for a in range(n + 1)
                             for d in range(n + 1 - a)}
    for (n, a, d), expected in EXPECTED.items():
        assert tier(a, d, n) == expected, (n, a, d)


@pytest.mark.parametrize("n", range(6))
def test_every_vote_combination_through_the_tally(n):
    """Every assignment of agree/dispute/neutral/no vote to n eligible judges, run through the
    whole tally: the author (who also votes on its own finding) and a seat whose judgement did
    not come back are never counted."""
    judges = [f"j{i}" for i in range(n)]
    for combo in itertools.product(("agree", "dispute", "neutral", None), repeat=n):
        votes = [v(j, "F1", vote) for j, vote in zip(judges, combo, strict=True) if vote]
        votes += [v("author", "F1", "agree"), v("silent", "F1", "dispute")]
        out = tally(["author", "silent", *judges], [f("F1", "author")], votes, {},
                    judges=["author", *judges])
        g = out["groups"][0]
        a, d = combo.count("agree"), combo.count("dispute")
        assert g["tier"] == EXPECTED[(n, a, d)], combo
        assert g["counts"] == {"agree": a, "dispute": d, "neutral": n - a - d, "judges": n,
                               "missing": combo.count(None), "raised_by": 1}


def test_tiers_and_counts_for_a_hand_computed_bench():
    findings = [f("F1", "a", "off by one in the frame parser"),
                f("F2", "b", "missing timeout on the socket read", "net.py:40"),
                f("F3", "c", "log line leaks the user email", "log.py:2"),
                f("F4", "d", "typo in the docstring", "io.py:1", "nit")]
    votes = [v("b", "F1", "agree"), v("c", "F1", "agree"), v("d", "F1", "neutral"),
             v("a", "F2", "agree"), v("c", "F2", "dispute"), v("d", "F2", "neutral"),
             v("a", "F3", "dispute"), v("b", "F3", "dispute"), v("d", "F3", "agree"),
             v("a", "F4", "neutral"), v("b", "F4", "neutral")]
    out = tally(SEATS, findings, votes, {})
    tiers = {g["findings"][0]: (g["tier"], g["counts"]) for g in out["groups"]}
    assert tiers["F1"] == ("confirmed", {"agree": 2, "dispute": 0, "neutral": 1, "judges": 3,
                                         "missing": 0, "raised_by": 1})
    assert tiers["F2"][0] == "contested" and tiers["F2"][1]["judges"] == 3
    assert tiers["F3"][0] == "disputed"
    # c did not vote on F4: a missing vote is neutral
    assert tiers["F4"][0] == "singleton" and tiers["F4"][1]["neutral"] == 3
    assert tiers["F4"][1]["missing"] == 1
    assert out["tiers"] == {"confirmed": 1, "contested": 1, "singleton": 1, "disputed": 1}
    assert [g["tier"] for g in out["groups"]] == ["confirmed", "contested", "singleton",
                                                  "disputed"]
    assert out["line"] == CONCURRENCE_LINE
    assert out["seats"]["a"]["confirmed"] == 1 and out["seats"]["b"]["confirmed"] == 0


def test_a_vote_on_ones_own_finding_is_never_counted():
    findings = [f("F1", "a")]
    votes = [v("a", "F1", "agree"), v("b", "F1", "dispute")]
    out = tally(["a", "b"], findings, votes, {})
    g = out["groups"][0]
    assert g["counts"]["agree"] == 0 and g["counts"]["dispute"] == 1
    assert g["tier"] == "disputed"  # without the self-vote it would have been contested
    assert [x["judge"] for x in g["votes"]] == ["b"]
    assert out["excluded"]["self_votes"] == 1


def test_similar_findings_from_different_seats_are_one_group_counted_once():
    findings = [f("F1", "a", "the parser drops the last byte of every frame"),
                f("F2", "b", "frame parser drops the last byte", "./IO.py:11"),
                f("F3", "c", "unrelated: the config loader ignores env vars", "io.py:9")]
    # the co-authors a and b vote on each other's copy: not counted, they are not eligible
    votes = [v("c", "F1", "agree"), v("c", "F2", "agree"), v("d", "F1", "agree"),
             v("a", "F2", "dispute"), v("b", "F1", "dispute"), v("a", "F3", "dispute"),
             v("b", "F3", "dispute")]
    out = tally(["a", "b", "c", "d"], findings, votes, {})
    group = next(g for g in out["groups"] if "F1" in g["findings"])
    assert group["findings"] == ["F1", "F2"] and group["seats"] == ["a", "b"]
    assert group["counts"] == {"agree": 2, "dispute": 0, "neutral": 0, "judges": 2,
                               "missing": 0, "raised_by": 2}
    assert group["tier"] == "confirmed"  # two co-author disputes are not a contest
    assert sorted(group["stances"]) == ["c", "d"]
    assert [c["claim"] for c in group["claims"]] == [
        "the parser drops the last byte of every frame", "frame parser drops the last byte"]
    assert out["findings"]["F2"]["group"] == group["id"]
    lone = next(g for g in out["groups"] if g["findings"] == ["F3"])
    assert lone["tier"] == "disputed"  # same location, different claim: not grouped
    assert out["seats"]["a"]["confirmed"] == 1 and out["seats"]["b"]["confirmed"] == 1
    assert out["excluded"]["self_votes"] == 2


def test_different_claims_at_one_location_stay_two_groups():
    findings = [f("F1", "a", "missing timeout on socket read", "net.py:40"),
                f("F2", "b", "socket read should log errors", "net.py:40")]
    out = tally(["a", "b", "c"], findings, [], {})
    assert [g["findings"] for g in out["groups"]] == [["F1"], ["F2"]]


@pytest.mark.parametrize("here, there, grouped", [
    ("io.py:9", "io.py:12", True),          # within 3 lines
    ("io.py:9", "io.py:13", False),
    ("io.py:9-20", "io.py:18", True),        # inside a range
    ("io.py:L30-L40", "io.py:lines 43 to 50", True),
    ("io.py:9", "other.py:9", False),        # another file
    ("io.py", "./IO.py:9", True),           # no line on one side: the claim decides
])
def test_locations_group_by_file_and_line_range(here, there, grouped):
    findings = [f("F1", "a", location=here), f("F2", "b", location=there)]
    assert (len(tally(["a", "b"], findings, [], {})["groups"]) == 1) is grouped


def test_a_judge_with_mixed_votes_on_one_group_is_neutral_on_it():
    findings = [f("F1", "a"), f("F2", "b", "parser drops the last byte of every frame")]
    votes = [v("c", "F1", "agree"), v("c", "F2", "dispute")]
    out = tally(["a", "b", "c"], findings, votes, {})
    assert out["groups"][0]["counts"] == {"agree": 0, "dispute": 0, "neutral": 1, "judges": 1,
                                          "missing": 0, "raised_by": 2}
    assert out["groups"][0]["tier"] == "singleton"


def test_two_findings_from_one_seat_are_never_grouped():
    findings = [f("F1", "a"), f("F2", "a")]
    assert len(tally(["a", "b"], findings, [], {})["groups"]) == 2


def test_street_cred_is_normalised_rank_without_self_ranks():
    rankings = {"a": ["a", "b", "c"],  # a ranks itself first: dropped, b becomes 1st of 2
                "b": ["a", "c"], "c": ["b", "a", "zz"]}
    out = tally(["a", "b", "c"], [], [], rankings)
    seats = out["seats"]
    assert seats["a"]["ranks"] == [1, 2] and seats["a"]["street_cred"] == 0.5
    assert seats["b"]["ranks"] == [1, 1] and seats["b"]["street_cred"] == 1.0
    assert seats["c"]["ranks"] == [2, 2] and seats["c"]["street_cred"] == 0.0
    assert out["excluded"]["self_ranks"] == 1 and out["excluded"]["unknown_ranks"] == 1


def test_street_cred_compares_across_council_sizes():
    # first of 4 from every peer and first of 2 from every peer: both 1; last is 0 anywhere
    five = [f"s{i}" for i in range(5)]
    big = tally(five, [], [], {j: [s for s in five if s != j] for j in five})
    assert big["seats"]["s0"]["street_cred"] == pytest.approx(1.0, abs=0.3)
    ranked_first = tally(five, [], [], {j: ["s0", *[s for s in five if s not in (j, "s0")]]
                                        for j in five[1:]})
    assert ranked_first["seats"]["s0"]["street_cred"] == 1.0
    three = tally(["a", "b", "c"], [], [], {"b": ["a", "c"], "c": ["a", "b"]})
    assert three["seats"]["a"]["street_cred"] == 1.0
    # a 2-seat council: each judge ranks one review, which says nothing
    two = tally(["a", "b"], [], [], {"a": ["b"], "b": ["a"]})
    assert two["seats"]["a"]["street_cred"] is None and two["seats"]["a"]["ranks"] == [1]


def test_street_cred_ties_and_unranked_seats():
    out = tally(["a", "b", "c"], [], [], {"c": ["a", "b"], "b": ["a"], "a": ["b"]})
    assert out["seats"]["a"]["street_cred"] == 1.0 and out["seats"]["b"]["street_cred"] == 0.0
    # a rotation: every seat is ranked once first and once second, a three-way tie
    out = tally(["a", "b", "c"], [], [], {"a": ["b", "c"], "b": ["c", "a"], "c": ["a", "b"]})
    assert {s["street_cred"] for s in out["seats"].values()} == {0.5}
    assert tally(["a", "b"], [], [], {})["seats"]["a"]["street_cred"] is None


def test_unknown_findings_and_votes_are_ignored_not_counted():
    out = tally(["a", "b"], [f("F1", "a")], [v("b", "F9", "agree"), v("b", "F1", "maybe")], {})
    assert out["groups"][0]["counts"]["judges"] == 1  # b is eligible: its vote is missing
    assert out["groups"][0]["counts"]["missing"] == 1
    assert out["excluded"]["unknown_votes"] == 2


def test_the_same_input_in_any_order_gives_the_same_tally():
    findings = [f(f"F{i}", SEATS[i % 4], f"claim number {i} about thing{i}", f"m.py:{i}")
                for i in range(1, 13)]
    votes = [v(j, x["id"], ("agree", "dispute", "neutral")[(i + k) % 3])
             for i, x in enumerate(findings) for k, j in enumerate(SEATS) if j != x["seat"]]
    rankings = {j: [s for s in SEATS if s != j] for j in SEATS}
    first = tally(SEATS, findings, votes, rankings)
    rng = random.Random(7)
    for _ in range(5):
        fs, vs = findings[:], votes[:]
        rng.shuffle(fs)
        rng.shuffle(vs)
        assert tally(SEATS, fs, vs, rankings) == first
    assert [g["findings"][0] for g in first["groups"]][:1]  # F10 sorts after F9, not F1
    ids = list(first["findings"])
    assert ids.index("F10") > ids.index("F9")
