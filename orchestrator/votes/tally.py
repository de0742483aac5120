"""Counting: the majority of final answers (``orch fanout --aggregate vote``) and the winner of
a deliberation by support (its holders now plus the votes of legs holding another answer).
Only answers some leg holds now can win; a vote counts for an answer the voter does not hold
itself; a leg may decline to vote; a tie-break reports the criterion that decided it.

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
SUPPORT = "support"
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
    """One leg's ballot in a deliberation's round, as it was cast: a vote for the answer it
    was shown (``shown``, a digest), which the legs ``shown_legs`` held then; or, with
    ``shown`` None, a decline: the leg judged no other answer better than its own."""

    voter: int
    shown: str | None
    shown_legs: tuple[int, ...] = ()

    @property
    def declined(self) -> bool:
        return self.shown is None


SELF_VOTE = "a self-vote: the voter holds that answer itself now, so it is not counted"
LAPSED = ("nobody holds the answer it voted for now, and the legs that held it went "
          "different ways: not counted")
DECLINED = "declined: no other answer is better than its own (counts for none)"


def resolve(vote: Vote, holdings: dict[int, str]) -> tuple[str | None, str | None]:
    """(the answer the vote counts for, None) or (None, why it counts for none).

    A vote was cast on an answer as it was shown (the previous round's). It counts for that
    answer while some leg holds it; once nobody does, for the answer its holders all moved to
    (one answer), else for none. It never counts for the answer the voter holds itself
    (compared by digest: a copy a peer holds is the voter's own answer too). A decline
    counts for none (:data:`DECLINED`)."""
    if vote.shown is None:
        return None, DECLINED
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


def standings(rounds: Sequence[Sequence[Vote]], holdings: dict[int, str]) -> dict[str, Any]:
    """Each held answer's holders, votes and support, and the round that decided the votes.

    Every ballot is resolved against what the legs hold now (:func:`resolve`). The deciding
    round is the last one in which some leg's vote counted or some leg declined, and only its
    ballots count (one per leg: a decline there supersedes that leg's earlier votes; a leg
    silent in it counts as a holder only; a round whose every reply was unreadable says
    nothing). ``support`` = the legs holding the answer
    now + the votes counted for it in the deciding round; a vote never counts for the
    voter's own answer, so no leg counts twice for one answer."""
    counted: list[list[tuple[int, str]]] = []
    spoke: list[bool] = []
    for cast in rounds:
        got = []
        for v in cast:
            target, _ = resolve(v, holdings)
            if target is not None:
                got.append((v.voter, target))
        counted.append(got)
        spoke.append(bool(got) or any(v.declined for v in cast))
    deciding = max((i for i, s in enumerate(spoke) if s), default=None)
    holders = Counter(holdings.values())
    last = Counter(d for _, d in counted[deciding]) if deciding is not None else Counter()
    total = Counter(d for c in counted for _, d in c)
    voters: dict[str, set[int]] = {}
    for c in counted:
        for voter, d in c:
            voters.setdefault(d, set()).add(voter)
    return {"round": None if deciding is None else deciding + 1,
            "any_vote": any(counted), "holders": holders, "votes": last, "total": total,
            "voters": voters, "support": Counter({d: holders[d] + last[d] for d in holders})}


def winner(rounds: Sequence[Sequence[Vote]], holdings: dict[int, str]) -> dict[str, Any] | None:
    """The answer a deliberation ends on, among the answers legs hold now (``holdings``: leg
    -> digest; None when no leg holds one).

    The answer with the most support (:func:`standings`: its holders now + the votes counted
    for it in the deciding round) wins. Ties are broken, in turn, by: held by more legs now;
    more votes over all rounds; more distinct voters over all rounds; the answer held by the
    leg earliest in ``--models``. ``by`` is ``"votes"`` when some vote counted in the
    deciding round, else ``"holders"`` (support is then the holders alone)."""
    if not holdings:
        return None
    st = standings(rounds, holdings)
    holders, last, total, voters, support = (st[k] for k in (
        "holders", "votes", "total", "voters", "support"))
    first = _first_holder(holdings)
    candidates = sorted(holders, key=lambda d: first[d])
    win = ranked(candidates, [(SUPPORT, lambda d: support[d]),
                              (MORE_HOLDERS, lambda d: holders[d]),
                              (MORE_VOTES, lambda d: total[d]),
                              (MORE_VOTERS, lambda d: len(voters.get(d, ()))),
                              (EARLIEST, lambda d: -first[d])])
    best = win["digest"]
    by_votes = bool(+last)
    return {**win, "by": "votes" if by_votes else "holders", "support": support[best],
            "votes": last[best], "votes_round": st["round"] if by_votes else None,
            "votes_all_rounds": total[best], "holders": holders[best],
            "legs": sorted(leg for leg, d in holdings.items() if d == best)}
