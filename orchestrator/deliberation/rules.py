"""The rules of a deliberation as pure functions of plain data: who sees whom, how answers are
labelled for each leg, and when to stop (docs/deliberation.md). Counting the votes is
votes/tally.py's; an answer's identity votes/answer.py's.

Nothing here sends a request or reads a file, so every rule is tested by a table.
"""

from __future__ import annotations

import hashlib
import random

# The stop rules, in the order they are checked after a round (the first that holds is
# recorded; any others that also hold are listed beside it).
UNREAD = "unread"  # round >= 2 and no reply of it could be read: another round buys nothing
UNCHANGED = "unchanged"  # round >= 2 and no leg in play changed its answer this round
CONSENSUS = "consensus"  # every leg in play holds the same answer (by digest)
ROUNDS = "rounds"  # --rounds reached
CEILING = "ceiling"  # the cost ceiling cannot pay for the next round: it was not launched
ALONE = "alone"  # fewer than two legs in play: nobody left to read
STOP_RULES = (UNREAD, UNCHANGED, CONSENSUS, ROUNDS, CEILING, ALONE)

ALL_PEERS_UP_TO = 5  # with at most this many legs, each sees all the others by default
DEFAULT_PEERS = 4  # above it, each sees this many


def seeded(*parts: object) -> random.Random:
    """A random generator that depends only on ``parts`` (stable across runs and Pythons)."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def default_peers(n: int) -> int:
    """How many peers each of ``n`` legs sees when ``--peers`` is not given."""
    return max(0, n - 1) if n <= ALL_PEERS_UP_TO else DEFAULT_PEERS


def peer_graph(n: int, k: int, *seed: object) -> list[list[int]]:
    """Who each of ``n`` legs reads: leg i reads ``graph[i]``, ``k`` others (at most n-1).

    A fixed random regular graph: the legs are put in a seeded random circle and each reads
    the ``k`` that follow it, so every leg reads ``k`` answers and is read by ``k`` legs (no
    answer is shown more than another); a new seed each round gives each round new pairs."""
    k = max(0, min(k, n - 1))
    circle = list(range(n))
    seeded("peers", *seed).shuffle(circle)
    graph: list[list[int]] = [[] for _ in range(n)]
    for pos, leg in enumerate(circle):
        graph[leg] = sorted(circle[(pos + step) % n] for step in range(1, k + 1))
    return graph


def label_name(n: int) -> str:
    return f"Answer {chr(ord('A') + n)}" if n < 26 else f"Answer {n + 1}"


def deal_labels(peers: list[int], *seed: object) -> dict[str, int]:
    """The labels one leg sees for its peers (label → peer), dealt in a seeded shuffle per
    leg and round, so a label says nothing about the order of ``--models``. The leg's own
    answer never gets a label: it cannot be voted for, by construction."""
    order = list(peers)
    seeded("labels", *seed).shuffle(order)
    return {label_name(i): peer for i, peer in enumerate(order)}


def votable(own: str | None, peers: list[tuple[int, str | None]]
            ) -> tuple[list[tuple[str, tuple[int, ...]]], int]:
    """What one leg can vote for among the ``peers`` it reads (leg, answer digest): each
    distinct answer once, with the legs holding it, in the order read; an answer identical
    to its own (by digest) is never offered, so a leg cannot vote for its own answer through
    a peer's copy. Also how many of the peers it reads hold its own answer."""
    groups: dict[str, list[int]] = {}
    same = 0
    for leg, d in peers:
        if d is None:
            continue
        if d == own:
            same += 1
            continue
        groups.setdefault(d, []).append(leg)
    return [(d, tuple(legs)) for d, legs in groups.items()], same


def stop_rules(*, round_no: int, max_rounds: int, holds: list[str | None],
               changed: list[bool], replies: int = 0, read: int = 0) -> list[str]:
    """Every stop rule that holds after ``round_no`` (empty: go on), in :data:`STOP_RULES`
    order. ``holds``: the answer digest of each leg in play; ``changed``: whether each leg
    in play changed its answer in this round (round 1: nothing to compare with);
    ``replies``/``read``: how many replies this round received and how many could be read.

    ``consensus`` holds as soon as every leg in play holds the same answer, after round 1
    too: another round could only have them vote for each other's copy of it."""
    held = []
    if round_no >= 2 and replies and not read:
        held.append(UNREAD)
    if round_no >= 2 and holds and not any(changed):
        held.append(UNCHANGED)
    if len(holds) >= 2 and None not in holds and len(set(holds)) == 1:
        held.append(CONSENSUS)
    if round_no >= max_rounds:
        held.append(ROUNDS)
    if len(holds) < 2:
        held.append(ALONE)
    return held


def votes_unread(later_rounds: list[list[dict]]) -> str | None:
    """Why a run is degraded when nothing its later rounds said could be used: it received
    replies in rounds >= 2 and not one carried a vote it could read (an unreadable reply
    casts none). None otherwise. ``later_rounds``: the legs of each round >= 2 as the
    document records them (``readable``, ``vote``)."""
    replies = [leg for legs in later_rounds for leg in legs if leg.get("readable") is not None]
    if not replies or any(leg.get("vote") for leg in replies):
        return None
    unread = sum(1 for leg in replies if leg.get("readable") is False)
    return (f"no vote of rounds 2-{len(later_rounds) + 1} could be read ({len(replies)} "
            f"replies, {unread} unreadable): the answers stand as the legs last wrote them, "
            "unweighed by their peers")
