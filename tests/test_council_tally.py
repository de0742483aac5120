"""The tally is a pure function: tiers from votes, street-cred from ranks, self-votes and
self-ranks never counted, similar findings grouped, same input → same output."""

from __future__ import annotations

import random

import pytest

from orchestrator.council.tally import CONCURRENCE_LINE, tally, tier

SEATS = ["a", "b", "c", "d"]


def f(fid, seat, claim="the parser drops the last byte of every frame", location="io.py:9",
      severity="major"):
    return {"id": fid, "seat": seat, "severity": severity, "claim": claim, "location": location}


def v(judge, fid, vote, reason="because"):
    return {"judge": judge, "finding": fid, "vote": vote, "reason": reason}


@pytest.mark.parametrize("agree, dispute, expected", [
    (3, 0, "confirmed"),
    (1, 0, "confirmed"),      # neutral votes abstain: one side taken, and it agrees
    (1, 1, "contested"),      # a tie is not a majority dispute
    (2, 1, "contested"),
    (1, 2, "disputed"),
    (0, 1, "disputed"),
    (0, 0, "singleton"),
    (2, 2, "contested"),
])
def test_tier_rules(agree, dispute, expected):
    assert tier(agree, dispute) == expected


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
                                         "raised_by": 1})
    assert tiers["F2"][0] == "contested" and tiers["F2"][1]["judges"] == 3
    assert tiers["F3"][0] == "disputed"
    assert tiers["F4"][0] == "singleton" and tiers["F4"][1]["neutral"] == 2
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
                f("F2", "b", "frame parser drops the last byte", "./IO.py:9"),
                f("F3", "c", "unrelated: the config loader ignores env vars", "io.py:9")]
    # c agrees with both copies: one stance; a and b each vote on the other's copy
    votes = [v("c", "F1", "agree"), v("c", "F2", "agree"), v("a", "F2", "agree"),
             v("b", "F1", "agree"), v("a", "F3", "dispute")]
    out = tally(["a", "b", "c"], findings, votes, {})
    group = next(g for g in out["groups"] if "F1" in g["findings"])
    assert group["findings"] == ["F1", "F2"] and group["seats"] == ["a", "b"]
    assert group["counts"]["agree"] == 3 and group["counts"]["judges"] == 3
    assert group["counts"]["raised_by"] == 2
    assert out["findings"]["F2"]["group"] == group["id"]
    lone = next(g for g in out["groups"] if g["findings"] == ["F3"])
    assert lone["tier"] == "disputed"  # same location, different claim: not grouped
    assert out["seats"]["a"]["confirmed"] == 1 and out["seats"]["b"]["confirmed"] == 1


def test_a_judge_with_mixed_votes_on_one_group_is_neutral_on_it():
    findings = [f("F1", "a"), f("F2", "b", "parser drops the last byte of every frame")]
    votes = [v("c", "F1", "agree"), v("c", "F2", "dispute")]
    out = tally(["a", "b", "c"], findings, votes, {})
    assert out["groups"][0]["counts"] == {"agree": 0, "dispute": 0, "neutral": 1, "judges": 1,
                                          "raised_by": 2}
    assert out["groups"][0]["tier"] == "singleton"


def test_two_findings_from_one_seat_are_never_grouped():
    findings = [f("F1", "a"), f("F2", "a")]
    assert len(tally(["a", "b"], findings, [], {})["groups"]) == 2


def test_street_cred_is_mean_peer_rank_without_self_ranks():
    rankings = {"a": ["a", "b", "c"],  # a ranks itself first: dropped, b becomes 1st
                "b": ["a", "c"], "c": ["b", "a", "zz"]}
    out = tally(["a", "b", "c"], [], [], rankings)
    seats = out["seats"]
    assert seats["a"]["ranks"] == [1, 2] and seats["a"]["street_cred"] == 1.5
    assert seats["b"]["ranks"] == [1, 1] and seats["b"]["street_cred"] == 1.0
    assert seats["c"]["ranks"] == [2, 2] and seats["c"]["street_cred"] == 2.0
    assert out["excluded"]["self_ranks"] == 1 and out["excluded"]["unknown_ranks"] == 1


def test_street_cred_ties_and_unranked_seats():
    out = tally(["a", "b", "c"], [], [], {"c": ["a", "b"], "b": ["a"], "a": ["b"]})
    assert out["seats"]["a"]["street_cred"] == 1.0 and out["seats"]["b"]["street_cred"] == 1.5
    # a rotation: every seat is ranked once first and once second, a three-way tie
    out = tally(["a", "b", "c"], [], [], {"a": ["b", "c"], "b": ["c", "a"], "c": ["a", "b"]})
    assert {s["street_cred"] for s in out["seats"].values()} == {1.5}
    assert tally(["a", "b"], [], [], {})["seats"]["a"]["street_cred"] is None


def test_unknown_findings_and_votes_are_ignored_not_counted():
    out = tally(["a", "b"], [f("F1", "a")], [v("b", "F9", "agree"), v("b", "F1", "maybe")], {})
    assert out["groups"][0]["counts"]["judges"] == 0
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
