"""``orch fanout --aggregate vote`` end to end on the scripted server: the majority over the
legs' normalised final answers, with ties and no majority said, in the terminal, ``--json``
and ``wave.json``; for a deliberation's final answers too."""

from __future__ import annotations

import json

import pytest

from orchestrator.testing.daemon import invoke
from orchestrator.testing.scripted_server import Reply


def run(server, answers: dict[str, object], *extra):
    for model, reply in answers.items():
        server.script(model, reply if isinstance(reply, Reply) else Reply(text=reply))
    return invoke(["fanout", "-m", ",".join(f"scripted/{m}" for m in answers), "-p",
                   "What is 8 + 9?", "--tools", "none", "--aggregate", "vote", *extra])


def test_the_majority_over_normalised_answers(orch, scripted_server, orch_home):
    orch.provider()
    answers = {"a": "17", "b": "**17**.", "c": "18", "d": " 17 ", "e": "The answer is 19."}
    result = run(scripted_server, answers, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    agg = doc["aggregate"]
    assert (agg["outcome"], agg["answers"], agg["of_legs"]) == ("majority", 5, 5)
    assert agg["winner"]["models"] == ["scripted/a", "scripted/b", "scripted/d"]
    assert agg["winner"]["votes"] == 3 and agg["winner"]["answer"] == "17"
    assert [g["votes"] for g in agg["groups"]] == [3, 1, 1] and agg["tie_break"] is None
    on_disk = json.loads((orch_home / "runs" / doc["wave_id"] / "wave.json").read_text())
    assert on_disk["aggregate"] == agg and on_disk["options"]["aggregate"] == "vote"
    human = run(scripted_server, answers)
    assert "Vote: majority, 3 of 5 answers (the others: 1, 1): the answer of scripted/a, " \
           "scripted/b, scripted/d" in human.stdout
    # one answer held by several legs is printed once, with their names
    assert "The answer of scripted/a, scripted/b, scripted/d (3 legs, the same answer):\n17" \
        in human.stdout


@pytest.mark.parametrize("answers,says", [
    ({"a": "17", "b": "18"}, "Vote: tie, 2 answers with 1 each of 2 answers; broken by the "
                             "answer held by the leg earliest in --models: the answer of "
                             "scripted/a"),
    ({"a": "17", "b": "18", "c": "18", "d": "19"},
     "Vote: no majority; the most, 2 of 4 answers (the others: 1, 1): the answer of "
     "scripted/b, scripted/c"),
    ({"a": "17", "b": None, "c": "17"},
     "Vote: majority, 2 of 2 of 3 legs answered: the answer of scripted/a, scripted/c"),
    ({"a": None}, "Vote: no answer to count (0 of 1 legs answered)"),
])
def test_ties_and_no_majority_are_said(answers, says):
    """The same count and lines as above, on the legs' documents (None: a leg that failed)."""
    from orchestrator.votes.aggregate import vote
    from orchestrator.votes.lines import vote_lines

    legs = [{"leg_id": f"w-{n}", "model": f"scripted/{m}", "answer": text,
             "status": "complete" if text is not None else "error"}
            for n, (m, text) in enumerate(answers.items(), start=1)]
    assert vote_lines(vote(legs)) == [says]


def test_a_deliberation_counts_its_final_answers(orch, scripted_server):
    orch.provider()
    keep = '```json\n{"decision": "keep", "vote": "A", "reason": "fine"}\n```'
    for name, text in (("a", "17"), ("b", "18"), ("c", "18")):
        scripted_server.script(name, Reply(text=text), Reply(text=keep))
    result = invoke(["fanout", "-m", "scripted/a,scripted/b,scripted/c", "-p", "8 + 9?",
                     "--tools", "none", "--aggregate", "vote", "--rounds", "3", "--json"])
    doc = json.loads(result.stdout)
    assert doc["kind"] == "deliberation" and doc["stop"]["rule"] == "unchanged"
    agg = doc["aggregate"]
    assert agg["outcome"] == "majority" and agg["winner"]["models"] == ["scripted/b",
                                                                        "scripted/c"]
