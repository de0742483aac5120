"""The deliberation's rules as tables: who reads whom, labels, stop rules, the winner, replies."""

from __future__ import annotations

from collections import Counter

import pytest

from orchestrator.deliberation import rules
from orchestrator.deliberation.reply import INSTRUCTION, read_reply, round_prompt
from orchestrator.deliberation.rules import Ballot


@pytest.mark.parametrize("n,k", [(2, 1), (3, 2), (5, 4), (8, 4), (8, 1), (13, 3), (6, 9)])
def test_peer_graph_is_regular_without_self_loops(n, k):
    graph = rules.peer_graph(n, k, "run", 2)
    want = min(k, n - 1)
    assert all(len(peers) == want == len(set(peers)) for peers in graph)
    assert all(i not in peers for i, peers in enumerate(graph))  # nobody reads itself
    read_by = Counter(p for peers in graph for p in peers)
    assert all(read_by[i] == want for i in range(n))  # every answer is read as often


def test_peer_graph_is_seeded_per_round():
    assert rules.peer_graph(8, 3, "run", 2) == rules.peer_graph(8, 3, "run", 2)
    assert any(rules.peer_graph(8, 3, "run", r) != rules.peer_graph(8, 3, "run", 2)
               for r in (3, 4, 5))


@pytest.mark.parametrize("n,k", [(1, 0), (2, 1), (5, 4), (6, 4), (40, 4)])
def test_default_peers(n, k):
    assert rules.default_peers(n) == k


def test_labels_are_dealt_per_leg_and_never_name_the_leg_itself():
    for leg in range(6):
        peers = [p for p in range(6) if p != leg]
        labels = rules.deal_labels(peers, "run", 2, leg)
        assert sorted(labels.values()) == peers and leg not in labels.values()
    orders = {tuple(rules.deal_labels([1, 2, 3, 4], "run", 2, leg).values()) for leg in range(8)}
    assert len(orders) > 1  # labels do not follow the order of --models


@pytest.mark.parametrize("ballots,round_no,max_rounds,in_play,held", [
    ([], 1, 3, 3, []),
    ([], 1, 1, 3, ["rounds"]),
    ([], 1, 3, 1, ["alone"]),
    ([Ballot(1, True, "x"), Ballot(2, False, "y")], 2, 3, 2, []),
    ([Ballot(1, False, "x"), Ballot(2, False, "y")], 2, 3, 2, ["unchanged"]),
    ([Ballot(1, True, "x"), Ballot(2, False, "x")], 2, 3, 2, ["consensus"]),
    ([Ballot(1, True, "x"), Ballot(2, False, None)], 2, 3, 2, []),  # a missing vote: no
    ([Ballot(1, False, "x"), Ballot(2, False, "x")], 3, 3, 2,
     ["unchanged", "consensus", "rounds"]),
])
def test_stop_rules(ballots, round_no, max_rounds, in_play, held):
    assert rules.stop_rules(ballots, round_no=round_no, max_rounds=max_rounds,
                            in_play=in_play) == held


def votes(*pairs):
    return [{"voter": voter, "for_digest": d} for voter, d in pairs]


@pytest.mark.parametrize("rounds,order,digest,tie_break", [
    ([[]], ["a", "b"], None, None),
    ([[], votes((1, "b"), (2, "b"), (3, "a"))], ["a", "b"], "b", None),
    # a tie in the last round: more votes over all rounds wins
    ([[], votes((1, "a"), (2, "b")), votes((1, "b"), (2, "a"), (3, "b"))], ["a", "b"],
     "b", None),
    ([[], votes((1, "a"), (2, "a"), (3, "b")), votes((1, "b"), (2, "a"))], ["a", "b"], "a",
     "more votes over all rounds"),
    # same totals, more distinct voters
    ([[], votes((1, "a"), (1, "a"), (2, "b"), (3, "b")), votes((2, "a"), (1, "b"))],
     ["a", "b"], "b", "more distinct voters over all rounds"),
    # nothing separates them: the leg earliest in --models
    ([[], votes((1, "b"), (2, "a"))], ["b", "a"], "b",
     "the answer held by the leg earliest in --models"),
    ([[], votes((1, "b"), (2, "a"))], ["a", "b"], "a",
     "the answer held by the leg earliest in --models"),
    # the last round without votes does not count: the last one with votes does
    ([[], votes((1, "a")), []], ["a"], "a", None),
])
def test_winner(rounds, order, digest, tie_break):
    win = rules.winner(rounds, order)
    if digest is None:
        assert win is None
    else:
        assert win["digest"] == digest and win["tie_break"] == tie_break


def test_digest_ignores_spacing_only():
    assert rules.digest("a  b\nc") == rules.digest(" a b c ")
    assert rules.digest("a b c") != rules.digest("a c b")


LABELS = {"Answer A": "peer answer A", "Answer B": "peer answer B"}


@pytest.mark.parametrize("text,decision,answer,vote,problem", [
    ('Mine.\n```json\n{"decision": "keep", "vote": "A", "reason": "x"}\n```', "keep", "mine",
     "Answer A", None),
    ('New answer.\n```json\n{"decision": "revise", "vote": "Answer B", "reason": "x"}\n```',
     "revise", "New answer.", "Answer B", None),
    ('```json\n{"decision": "adopt", "adopt": "b", "vote": "B"}\n```', "adopt",
     "peer answer B", "Answer B", None),
    # json-repair: a trailing comma and no closing fence
    ('ok\n```json\n{"decision": "keep", "vote": "A",', "keep", "mine", "Answer A", None),
    ('no block at all', None, None, None, "there is no JSON block"),
    ('```json\n{"decision": "maybe", "vote": "A"}\n```', None, None, None, "maybe"),
    ('```json\n{"decision": "revise", "vote": "A"}\n```', None, None, None, "revise without"),
    ('```json\n{"decision": "adopt", "adopt": "Z", "vote": "A"}\n```', None, None, None,
     "adopt names no answer"),
])
def test_read_reply(text, decision, answer, vote, problem):
    got = read_reply(text, LABELS, "mine")
    if problem:
        assert got.problem and problem in got.problem
        return
    assert (got.problem, got.decision, got.answer, got.vote) == (None, decision, answer, vote)


def test_a_vote_for_a_label_not_shown_is_no_vote():
    """Self-votes are impossible by construction: the leg's own answer has no label, so any
    label it writes that it was not shown (its own, guessed) counts as no vote."""
    got = read_reply('```json\n{"decision": "keep", "vote": "C", "reason": "mine"}\n```',
                     LABELS, "mine")
    assert got.problem is None and got.vote is None and "names none of" in got.vote_problem


def test_the_instruction_is_short_and_the_own_answer_unlabelled():
    assert len(INSTRUCTION.format(labels="Answer A, Answer B, Answer C, Answer D")) <= 600
    prompt = round_prompt(round_no=2, max_rounds=3, own="MINE", peers=LABELS, nonce="n0")
    own_section = prompt.split("(yours: not votable)")[1].split("<<<")[0]
    assert "MINE" in own_section and "Answer" not in own_section
    assert prompt.count("MINE") == 1
