"""Vote counting as pure functions (orchestrator/votes): tables for the rules, hypothesis for
what must hold of every count — only an answer a leg holds now wins, by support (its holders
+ the other legs' counted votes; tests/test_votes_support.py), no counted vote is for the
voter's own answer, and a tie-break is exactly the criterion that separated the winner."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.votes.answer import digest, normalised
from orchestrator.votes.tally import (
    EARLIEST,
    LAPSED,
    MORE_HOLDERS,
    MORE_VOTERS,
    MORE_VOTES,
    SELF_VOTE,
    Vote,
    majority,
    resolve,
    winner,
)


@pytest.mark.parametrize("a,b,same", [
    ("17", "17.", True), ("**17**", " 17 ", True), ("The answer is 17.", "the answer is **17**",
                                                    True),
    ("a  b\nc", " a b c ", True), ("`x`", "x", True), ("Ｆｕｌｌ", "full", True),
    ("17", "18", False), ("a b c", "a c b", False), ("2**3", "23", False),
    ("my_var", "myvar", False), ("2 * 3", "2 3", False),
])
def test_normalised_answers(a, b, same):
    assert (normalised(a) == normalised(b)) is same
    assert (digest(a) == digest(b)) is same


@pytest.mark.parametrize("holdings,outcome,win,tie_break", [
    ({}, "none", None, None),
    ({1: "a", 2: "a", 3: "b"}, "majority", "a", None),
    ({1: "a", 2: "b", 3: "b", 4: "c", 5: "d"}, "plurality", "b", None),
    ({1: "a", 2: "a", 3: "b", 4: "b"}, "tie", "a", EARLIEST),
    ({1: "b", 2: "a", 3: "a", 4: "b"}, "tie", "b", EARLIEST),
    ({2: "x"}, "majority", "x", None),
])
def test_majority(holdings, outcome, win, tie_break):
    got = majority(holdings)
    assert (got["outcome"], got["digest"], got["tie_break"]) == (outcome, win, tie_break)
    if win:
        assert got["legs"] == sorted(n for n, d in holdings.items() if d == win)


NOW = {1: "a", 2: "b", 3: "b", 4: "c"}


@pytest.mark.parametrize("vote,counts,problem", [
    (Vote(1, "b", (2,)), "b", None),
    (Vote(2, "a", (1,)), "a", None),
    # a copy the voter holds is its own answer
    (Vote(2, "b", (3,)), None, SELF_VOTE),
    # nobody holds the answer voted for: it follows its holders, when they agree
    (Vote(1, "old", (2, 3)), "b", None),
    (Vote(1, "old", (2, 4)), None, LAPSED),
    (Vote(2, "old", (3,)), None, SELF_VOTE),  # it followed leg 3 to the voter's own answer
    (Vote(1, "old", (9,)), None, LAPSED),
])
def test_resolve(vote, counts, problem):
    assert resolve(vote, NOW) == (counts, problem)


@pytest.mark.parametrize("rounds,holdings,win,by,tie_break", [
    ([[]], {1: "a", 2: "b", 3: "b"}, "b", "holders", None),
    ([[]], {1: "a", 2: "b"}, "a", "holders", EARLIEST),
    ([[], [Vote(1, "b"), Vote(2, "a"), Vote(3, "a")]], {1: "a", 2: "b", 3: "c"}, "a", "votes",
     None),
    # support: the legs holding it now + the votes of legs holding another answer
    ([[], [Vote(1, "b"), Vote(2, "a")]], {1: "a", 2: "b", 3: "b"}, "b", "votes", None),
    ([[], [Vote(1, "c"), Vote(3, "a")]], {1: "a", 2: "a", 3: "c"}, "a", "votes", None),
    # three hold a, each voting for b (the only other answer), b's holder votes a: 4 and 4,
    # the answer more legs hold (the old rule gave b the win, 3 votes to 1)
    ([[], [Vote(1, "b"), Vote(2, "b"), Vote(3, "b"), Vote(4, "a")]],
     {1: "a", 2: "a", 3: "a", 4: "b"}, "a", "votes", MORE_HOLDERS),
    # everyone declines: by holders, then as before
    ([[], [Vote(1, None), Vote(2, None), Vote(3, None)]], {1: "a", 2: "b", 3: "b"}, "b",
     "holders", None),
    # then more votes over all rounds
    ([[], [Vote(1, "c"), Vote(3, "a")], [Vote(1, "c"), Vote(3, "a"), Vote(2, "a")]],
     {1: "a", 2: "b", 3: "c"}, "a", "votes", None),
    ([[], [Vote(2, "c"), Vote(1, "c")], [Vote(1, "c"), Vote(3, "a")]],
     {1: "a", 2: "b", 3: "c"}, "c", "votes", MORE_VOTES),
    # then more distinct voters
    ([[], [Vote(2, "a"), Vote(1, "c")], [Vote(2, "a"), Vote(1, "c")],
      [Vote(1, "c"), Vote(3, "a")]], {1: "a", 2: "b", 3: "c"}, "a", "votes", MORE_VOTERS),
    # nothing separates them: the leg earliest in --models
    ([[], [Vote(1, "b"), Vote(2, "a")]], {1: "a", 2: "b"}, "a", "votes", EARLIEST),
    # a stale answer nobody holds never wins: its votes follow its holder (leg 2, now "c")
    ([[], [Vote(1, "old", (2,)), Vote(3, "old", (2,))]], {1: "a", 2: "c", 3: "b"}, "c",
     "votes", None),
    # the votes of an earlier round count what legs hold now: leg 1 adopted "b" since
    ([[], [Vote(1, "b")], []], {1: "b", 2: "b", 3: "c"}, "b", "holders", None),
])
def test_winner(rounds, holdings, win, by, tie_break):
    got = winner(rounds, holdings)
    assert (got["digest"], got["by"], got["tie_break"]) == (win, by, tie_break)


def test_no_winner_without_an_answer():
    assert winner([[], [Vote(1, "a")]], {}) is None


# -- properties ------------------------------------------------------------------------------

DIGESTS = st.sampled_from(["a", "b", "c", "d", "old", None])  # None: a decline


@st.composite
def deliberations(draw):
    n = draw(st.integers(1, 6))
    holdings = {leg: draw(st.sampled_from("abcd")) for leg in range(1, n + 1)
                if draw(st.booleans()) or leg == 1}
    legs = list(range(1, n + 1))
    rounds = [[]] + [
        [Vote(voter, draw(DIGESTS), tuple(draw(st.lists(st.sampled_from(legs), max_size=3))))
         for voter in draw(st.lists(st.sampled_from(legs), max_size=n, unique=True))]
        for _ in range(draw(st.integers(0, 3)))]
    return rounds, holdings


def reference(rounds, holdings):
    """The winner rule computed a second way: every criterion's scores from the counted
    votes, then candidates filtered criterion by criterion until one is left."""
    counted = [[(v.voter, t) for v in r for t, _ in [resolve(v, holdings)] if t] for r in rounds]
    spoke = [c for c, r in zip(counted, rounds, strict=True)
             if c or any(v.shown is None for v in r)]
    deciding = spoke[-1] if spoke else []
    candidates = sorted(set(holdings.values()), key=lambda d: min(
        n for n, h in holdings.items() if h == d))
    scores = {}
    names = ["support", MORE_HOLDERS, MORE_VOTES, MORE_VOTERS, EARLIEST]
    for d in candidates:
        holders = sum(1 for h in holdings.values() if h == d)
        scores[d] = [holders + sum(1 for _, t in deciding if t == d), holders,
                     sum(1 for c in counted for _, t in c if t == d),
                     len({v for c in counted for v, t in c if t == d}),
                     -min(n for n, h in holdings.items() if h == d)]
    remaining = list(candidates)
    for i in range(len(names)):
        top = max(scores[d][i] for d in remaining)
        remaining = [d for d in remaining if scores[d][i] == top]
        if len(remaining) == 1:
            break
    return remaining[0], scores, names, bool(deciding)


@settings(max_examples=150, deadline=None)
@given(deliberations())
def test_the_winner_is_held_now_and_counts_no_self_vote(case):
    rounds, holdings = case
    got = winner(rounds, holdings)
    assert got["digest"] in holdings.values()
    assert got["legs"] == sorted(n for n, d in holdings.items() if d == got["digest"])
    for r in rounds:
        for v in r:
            target, problem = resolve(v, holdings)
            assert (target is None) != (problem is None)
            if target is not None:
                assert target in holdings.values() and target != holdings.get(v.voter)
    best, scores, names, by_votes = reference(rounds, holdings)
    assert got["digest"] == best and got["by"] == ("votes" if by_votes else "holders")
    # the tie-break reported is the criterion after which the winner stood alone
    tied = [d for d in scores if d != best and scores[d][0] == scores[best][0]]
    assert sorted(got["tie_break"] and tied or []) == sorted(got["tied_with"])
    if not tied:
        assert got["tie_break"] is None
    else:
        k = names.index(got["tie_break"])
        alive = [d for d in tied if scores[d][1:k] == scores[best][1:k]]
        assert alive and all(scores[d][k] < scores[best][k] for d in alive)


@settings(max_examples=60, deadline=None)
@given(deliberations(), st.randoms(use_true_random=False))
def test_the_order_votes_arrive_in_changes_nothing(case, rnd):
    rounds, holdings = case
    shuffled = [rnd.sample(r, len(r)) for r in rounds]
    assert winner(shuffled, holdings) == winner(rounds, holdings)


@settings(max_examples=60, deadline=None)
@given(deliberations())
def test_a_self_vote_added_changes_nothing(case):
    rounds, holdings = case
    voter = next(iter(holdings))
    more = [*rounds[:-1], [*rounds[-1], Vote(voter, holdings[voter], (voter,))]]
    assert winner(more, holdings) == winner(rounds, holdings)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.integers(1, 9), st.sampled_from("abc"), max_size=9))
def test_majority_properties(holdings):
    got = majority(holdings)
    if not holdings:
        assert got["outcome"] == "none"
        return
    count = Counter(holdings.values())
    top = max(count.values())
    assert got["votes"] == top == count[got["digest"]]
    shared = [d for d in count if count[d] == top]
    assert (got["outcome"] == "tie") == (len(shared) > 1)
    assert (got["outcome"] == "majority") == (len(shared) == 1 and 2 * top > len(holdings))
    first = {d: min(n for n, h in holdings.items() if h == d) for d in shared}
    assert got["digest"] == min(shared, key=first.get)
    assert sum(g["votes"] for g in got["groups"]) == len(holdings)


# -- one home: counting lives in orchestrator/votes -----------------------------------------

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
COUNTING = {"digest", "normalised", "majority", "winner"}


def counting_outside(root) -> list[str]:
    """Functions outside orchestrator/votes/ that would count answers or votes their own way
    (a second ``digest``, ``winner``, ``majority``): each concern has one home."""
    import ast

    found = []
    for top in ("orchestrator", "plugins"):
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel.startswith("orchestrator/votes/"):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and \
                        node.name in COUNTING:
                    found.append(f"{rel}:{node.name}")
    return found


def test_no_module_but_votes_counts_answers_or_votes():
    # the deliberation's ``winner`` (outcome.py, and run.py's delegate to it) presents
    # votes/tally.winner's result with the models and words; the plugin kit's
    # DeliberationResult.winner reads the run's document (doc["winner"]), counting nothing
    assert counting_outside(ROOT) == ["orchestrator/deliberation/outcome.py:winner",
                                      "orchestrator/deliberation/run.py:winner",
                                      "orchestrator/testing/deliberation_kit.py:winner"]


def test_a_second_digest_elsewhere_is_caught(tmp_path):
    planted = tmp_path / "orchestrator" / "bakeoff" / "ensemble.py"
    planted.parent.mkdir(parents=True)
    planted.write_text("def digest(answer):\n    return hash(answer.strip())\n")
    assert counting_outside(tmp_path) == ["orchestrator/bakeoff/ensemble.py:digest"]
