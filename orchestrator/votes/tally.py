"""Counting: the majority of final answers (``orch fanout --aggregate vote``) and the winner of
a deliberation's votes. Only answers some leg holds now can win; a vote counts for an answer
the voter does not hold itself; a tie-break reports the criterion that decided it.

Every function takes plain data (leg numbers in the order of ``--models``, answer digests from
votes/answer.py) and returns plain data, so each rule is tested by a table and by properties
(tests/test_votes.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

EARLIEST = "the answer held by the leg earliest in --models"
MORE_HOLDERS = "held by more legs now"
MORE_VOTES = "more votes over all rounds"
MORE_VOTERS = "more distinct voters over all rounds"

MAJORITY, PLURALITY, TIE, NONE = "majority", "plurality", "tie", "none"

Criterion = tuple[str, Callable[[str], float]]  # (name, score: larger wins)


def ranked(candidates: Sequence[str], criteria: Sequence[Criterion]) -> dict[str, Any]:
    """The best candidate by ``criteria`` applied in turn (the first is the count; the last
    must tell every candidate apart), the candidates tied with it on the first, and the name
    of the criterion that separated it from them: after filtering by every criterion up to
    and including that one, the winner stands alone, and not before."""
    def key(c: str) -> tuple[float, ...]:
        return tuple(-score(c) for _, score in criteria)

    best = min(candidates, key=key)
    first = criteria[0][1]
    tied = [c for c in candidates if c != best and first(c) == first(best)]
    decided_by = None
    remaining = tied
    for name, score in criteria[1:]:
        if not remaining:
            break
        remaining = [c for c in remaining if score(c) == score(best)]
        decided_by = name
    return {"digest": best, "tied_with": sorted(tied), "tie_break": decided_by}


def _first_holder(holdings: dict[int, str]) -> dict[str, int]:
    """digest -> the earliest leg (in --models order: the smallest leg number) holding it."""
    first: dict[str, int] = {}
    for leg in sorted(holdings):
        first.setdefault(holdings[leg], leg)
    return first


def majority(holdings: dict[int, str]) -> dict[str, Any]:
    """``--aggregate vote``: each leg that answered is one vote for the answer it holds.

    ``holdings``: leg number (1-based, the order of ``--models``) -> the digest of its final
    answer, for the legs that answered. The outcome is ``majority`` (more than half the
    answers), ``plurality`` (the most, not more than half), ``tie`` (two or more share the
    most: the answer of the leg earliest in ``--models`` is taken, and said) or ``none`` (no
    answer to count)."""
    n = len(holdings)
    if not n:
        return {"outcome": NONE, "answers": 0, "digest": None, "votes": 0, "legs": [],
                "tied_with": [], "tie_break": None, "groups": []}
    count = Counter(holdings.values())
    first = _first_holder(holdings)
    win = ranked(list(count), [("votes", lambda d: count[d]),
                               (EARLIEST, lambda d: -first[d])])
    best = win["digest"]
    outcome = TIE if win["tied_with"] else MAJORITY if 2 * count[best] > n else PLURALITY
    groups = sorted(count, key=lambda d: (-count[d], first[d]))
    return {"outcome": outcome, "answers": n, "digest": best, "votes": count[best],
            "legs": sorted(leg for leg, d in holdings.items() if d == best),
            "tied_with": win["tied_with"], "tie_break": win["tie_break"],
            "groups": [{"digest": d, "votes": count[d],
                        "legs": sorted(leg for leg, h in holdings.items() if h == d)}
                       for d in groups]}


@dataclass(frozen=True)
class Vote:
    """One leg's vote in a deliberation's round, as it was cast: for the answer it was shown
    (``shown``, a digest), which the legs ``shown_legs`` held then."""

    voter: int
    shown: str
    shown_legs: tuple[int, ...] = ()


SELF_VOTE = "a self-vote: the voter holds that answer itself now, so it is not counted"
LAPSED = ("nobody holds the answer it voted for now, and the legs that held it went "
          "different ways: not counted")


def resolve(vote: Vote, holdings: dict[int, str]) -> tuple[str | None, str | None]:
    """(the answer the vote counts for, None) or (None, why it counts for none).

    A vote was cast on an answer as it was shown (the previous round's). It counts for that
    answer while some leg holds it; once nobody does, for the answer its holders all moved to
    (one answer), else for none. It never counts for the answer the voter holds itself
    (compared by digest: a copy a peer holds is the voter's own answer too)."""
    held = set(holdings.values())
    if vote.shown in held:
        target = vote.shown
    else:
        moved = {holdings[leg] for leg in vote.shown_legs if leg in holdings}
        if len(moved) != 1:
            return None, LAPSED
        target = moved.pop()
    if holdings.get(vote.voter) == target:
        return None, SELF_VOTE
    return target, None


def winner(rounds: Sequence[Sequence[Vote]], holdings: dict[int, str]) -> dict[str, Any] | None:
    """The answer a deliberation ends on, among the answers legs hold now (``holdings``: leg
    -> digest; None when no leg holds one).

    Every vote of every round is resolved against what the legs hold now (:func:`resolve`).
    The answer with the most counted votes in the last round that has any wins; ties are
    broken, in turn, by: held by more legs now; more votes over all rounds; more distinct
    voters over all rounds; the answer held by the leg earliest in ``--models``. Without a
    counted vote in any round, the answer held by the most legs wins (``by: "holders"``),
    then the earliest leg's."""
    if not holdings:
        return None
    counted: list[list[tuple[int, str]]] = []
    for cast in rounds:
        got = []
        for v in cast:
            target, _ = resolve(v, holdings)
            if target is not None:
                got.append((v.voter, target))
        counted.append(got)
    with_votes = [i for i, c in enumerate(counted) if c]
    holders = Counter(holdings.values())
    first = _first_holder(holdings)
    candidates = sorted(holders, key=lambda d: first[d])
    last = Counter(d for _, d in counted[with_votes[-1]]) if with_votes else Counter()
    total = Counter(d for c in counted for _, d in c)
    voters: dict[str, set[int]] = {}
    for c in counted:
        for voter, d in c:
            voters.setdefault(d, set()).add(voter)
    earliest: Criterion = (EARLIEST, lambda d: -first[d])
    if with_votes:
        win = ranked(candidates, [("votes", lambda d: last[d]),
                                  (MORE_HOLDERS, lambda d: holders[d]),
                                  (MORE_VOTES, lambda d: total[d]),
                                  (MORE_VOTERS, lambda d: len(voters.get(d, ()))), earliest])
    else:
        win = ranked(candidates, [("holders", lambda d: holders[d]), earliest])
    best = win["digest"]
    return {**win, "by": "votes" if with_votes else "holders", "votes": last[best],
            "votes_round": with_votes[-1] + 1 if with_votes else None,
            "votes_all_rounds": total[best], "holders": holders[best],
            "legs": sorted(leg for leg, d in holdings.items() if d == best)}
