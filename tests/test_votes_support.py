"""A deliberation's winner by support (orchestrator/votes/tally.py): the legs holding an answer
now plus the counted votes of legs holding another, so three legs holding A and one holding B
end on A, however the three voted; a declined vote (``Vote(voter, None)``: no other answer is
better than its own) is recorded as declined and counts for nothing else. Pure functions:
tables and a hypothesis property against a second computation of support."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.votes.tally import Vote, resolve, winner

THREE_A_ONE_B = {1: "a", 2: "a", 3: "a", 4: "b"}


@pytest.mark.parametrize("cast,win,support", [
    # the old instruction forced each A-holder to vote for B, the only other answer: B had 3
    # votes to A's 1 and won; by support A has 3 holders + 1 vote, B 1 + 3: held by more wins
    ([Vote(1, "b", (4,)), Vote(2, "b", (4,)), Vote(3, "b", (4,)), Vote(4, "a", (1, 2, 3))],
     "a", 4),
    # declining: the A-holders judge no other answer better than their own
    ([Vote(1, None), Vote(2, None), Vote(3, None), Vote(4, "a", (1, 2, 3))], "a", 4),
    ([Vote(1, None), Vote(2, None), Vote(3, None), Vote(4, None)], "a", 3),
    # one A-holder still prefers B: 3 + 0 against 1 + 1
    ([Vote(1, "b", (4,)), Vote(2, None), Vote(3, None), Vote(4, None)], "a", 3),
])
def test_three_holding_a_against_one_holding_b_end_on_a(cast, win, support):
    got = winner([[], cast], THREE_A_ONE_B)
    assert got["digest"] == win and got["legs"] == [1, 2, 3]
    assert got["support"] == support


def test_a_later_round_of_declines_supersedes_earlier_votes():
    """Leg 1 voted for B in round 2 and declined in round 3: its ballot now is the decline,
    so B gains nothing from it."""
    holdings = {1: "a", 2: "a", 3: "b"}
    rounds = [[], [Vote(1, "b", (3,)), Vote(2, "b", (3,)), Vote(3, None)],
              [Vote(1, None), Vote(2, None), Vote(3, None)]]
    got = winner(rounds, holdings)
    assert got["digest"] == "a"
    assert (got["support"], got["votes"]) == (2, 0)
    assert winner(rounds[:2], holdings)["support"] == 3  # B: 1 holder + 2 votes


def test_a_decline_counts_for_nothing_and_is_not_a_problem_vote():
    target, why = resolve(Vote(1, None), THREE_A_ONE_B)
    assert target is None and "declined" in why


# -- the property: the winner's support is maximal ------------------------------------------

@st.composite
def ballots(draw):
    """Holdings of up to 7 legs and up to 3 rounds of ballots: a vote for an answer as shown
    (held now, or by legs that moved on), a self-vote, or a decline."""
    n = draw(st.integers(1, 7))
    holdings = {leg: draw(st.sampled_from("abc")) for leg in range(1, n + 1)
                if leg == 1 or draw(st.booleans())}
    legs = list(range(1, n + 1))
    rounds = [[]]
    for _ in range(draw(st.integers(0, 3))):
        voters = draw(st.lists(st.sampled_from(legs), max_size=n, unique=True))
        rounds.append([Vote(v, draw(st.sampled_from(["a", "b", "c", "old", None])),
                            tuple(draw(st.lists(st.sampled_from(legs), max_size=2))))
                       for v in voters])
    return rounds, holdings


def support_of(rounds, holdings) -> dict[str, int]:
    """Support computed a second way: the ballots of the last round in which some leg's vote
    counted or some leg declined; each answer's holders plus the votes counted for it there,
    none of them from a leg that holds it."""
    def counts(v):
        return v.shown is None or resolve(v, holdings)[0] is not None

    deciding = next((r for r in reversed(rounds) if any(counts(v) for v in r)), [])
    votes = Counter()
    for v in deciding:
        target = resolve(v, holdings)[0]
        if target is not None:
            assert holdings.get(v.voter) != target  # never for its own answer twice
            votes[target] += 1
    held = Counter(holdings.values())
    return {d: held[d] + votes[d] for d in held}


@settings(max_examples=200, deadline=None)
@given(ballots())
def test_the_winners_support_is_maximal(case):
    rounds, holdings = case
    got = winner(rounds, holdings)
    support = support_of(rounds, holdings)
    assert got["digest"] in holdings.values()
    assert support[got["digest"]] == max(support.values())


@settings(max_examples=100, deadline=None)
@given(ballots())
def test_the_winner_reports_its_support(case):
    rounds, holdings = case
    got = winner(rounds, holdings)
    assert got["support"] == support_of(rounds, holdings)[got["digest"]]
    assert got["support"] == got["holders"] + got["votes"]
