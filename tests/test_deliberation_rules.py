"""The deliberation's rules as tables: who reads whom, labels, stop rules, the winner, replies."""

from __future__ import annotations

from collections import Counter

import pytest

from orchestrator.deliberation import rules
from orchestrator.deliberation.reply import INSTRUCTION, read_reply, round_prompt


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


@pytest.mark.parametrize("round_no,max_rounds,holds,changed,replies,read,held", [
    (1, 3, ["x", "y", "z"], [], 0, 0, []),
    (1, 1, ["x", "y"], [], 0, 0, ["rounds"]),
    (1, 3, ["x"], [], 0, 0, ["alone"]),
    (1, 3, [], [], 0, 0, ["alone"]),
    # the same answer everywhere after round 1: nothing left to deliberate
    (1, 3, ["x", "x", "x"], [], 0, 0, ["consensus"]),
    (2, 3, ["x", "y"], [True, False], 2, 2, []),
    (2, 3, ["x", "y"], [False, False], 2, 2, ["unchanged"]),
    (2, 3, ["x", "x"], [True, False], 2, 2, ["consensus"]),
    (2, 3, ["x", "x", "y"], [True, True, False], 3, 3, []),
    (3, 3, ["x", "x"], [False, False], 2, 2, ["unchanged", "consensus", "rounds"]),
    # no reply of the round could be read: another round buys nothing
    (2, 4, ["x", "y"], [False, False], 2, 0, ["unread", "unchanged"]),
    (2, 4, ["x", "y"], [False, False], 2, 1, ["unchanged"]),
    (2, 4, ["x", "y"], [False, False], 0, 0, ["unchanged"]),  # nobody was asked
])
def test_stop_rules(round_no, max_rounds, holds, changed, replies, read, held):
    assert rules.stop_rules(round_no=round_no, max_rounds=max_rounds, holds=holds,
                            changed=changed, replies=replies, read=read) == held


@pytest.mark.parametrize("own,peers,groups,same", [
    ("x", [(1, "y"), (2, "z")], [("y", (1,)), ("z", (2,))], 0),
    # a copy of its own answer is never offered; two peers with one answer: offered once
    ("x", [(1, "x"), (2, "y"), (3, "y")], [("y", (2, 3))], 1),
    ("x", [(1, "x"), (2, "x")], [], 2),
    ("x", [(1, None), (2, "y")], [("y", (2,))], 0),
])
def test_votable(own, peers, groups, same):
    assert rules.votable(own, peers) == (groups, same)


@pytest.mark.parametrize("later,degraded", [
    ([], False),
    ([[{"readable": True, "vote": {"label": "Answer A"}}]], False),
    ([[{"readable": False, "vote": None}, {"readable": None, "vote": None}]], True),
    # readable replies whose votes named nothing it was shown: no vote was read either
    ([[{"readable": True, "vote": None}], [{"readable": False, "vote": None}]], True),
    ([[{"readable": None, "vote": None}]], False),  # a leg that failed: not a reply
    ([[{"readable": False, "vote": None}], [{"readable": True, "vote": {"label": "B"}}]],
     False),
])
def test_votes_unread(later, degraded):
    assert (rules.votes_unread(later) is not None) == degraded


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


@pytest.mark.parametrize("own_round,says", [
    (1, "Your round-1 answer above, unchanged."),
    (3, "The answer you wrote in round 3 above (before its JSON block), unchanged."),
])
def test_an_answer_the_conversation_holds_is_pointed_at_not_repeated(own_round, says):
    prompt = round_prompt(round_no=4, max_rounds=5, own="MINE", own_round=own_round,
                          peers=LABELS, nonce="n0", same=2)
    assert "MINE" not in prompt and says in prompt
    assert "2 of the other answers you read are the same as yours" in prompt
