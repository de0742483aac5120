"""Declining to vote, end to end: the real CLI, HTTP to the scripted server through litellm.
The scripted legs obey the instruction they are sent: a leg holding an answer it judges best
declines when the instruction on the wire lets it, and otherwise must vote for the best
answer other than its own. Three legs holding 17 and one holding 18 then end on 17."""

from __future__ import annotations

import json
import re

from test_deliberation import USAGE, block, quoted, round_prompts

from orchestrator.testing.daemon import invoke
from orchestrator.testing.scripted_server import Reply
from orchestrator.votes.answer import digest

MODELS = ["m1", "m2", "m3", "m4"]
RIGHT, WRONG = "The answer is 17.", "The answer is 18."


def may_decline(prompt: str) -> bool:
    """Whether the round's instruction lets a leg vote for no other answer."""
    return '"vote": "label or none"' in prompt and 'vote "none"' in prompt


def obedient(first: str, best: str):
    """Round 1: ``first``. Later rounds: keep it, and vote for the label showing ``best``;
    when ``best`` is its own answer, decline if the instruction allows, else vote for the
    only answer it may (the first label shown)."""
    def reply(body, n):
        prompt = body["messages"][-1]["content"]
        shown = quoted(prompt)
        if not shown:
            return Reply(text=first, usage=USAGE)
        label = next((lb for lb, text in shown.items() if best in text), None)
        vote = label or ("none" if may_decline(prompt) else sorted(shown)[0])
        return Reply(text="Mine stands.\n" + block(decision="keep", vote=vote,
                                                     reason="checked the sum"), usage=USAGE)
    return reply


def deliberate(*args):
    return invoke(["fanout", "-m", ",".join(f"scripted/{m}" for m in MODELS), "-p",
                   "What is 8 + 9?", "--json", "--tools", "none", "--rounds", "2", *args])


def test_three_legs_holding_an_answer_beat_the_one_holding_another(orch, scripted_server,
                                                                   orch_home, tmp_path):
    """Under the old instruction each 17-holder had to vote for 18 (the only other answer)
    and 18 won 3-1. Now the instruction on the wire lets them decline; they do, the
    18-holder votes for 17, and 17 wins with support 4 (3 holders + 1 vote) against 1."""
    orch.provider()
    for m in MODELS[:3]:
        scripted_server.script(m, obedient(RIGHT, "17"))
    scripted_server.script("m4", obedient(WRONG, "17"))
    result = deliberate()
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    prompts = round_prompts(scripted_server)
    assert len(prompts) == 4 and all(may_decline(p) for _, p in prompts)
    win = doc["winner"]
    assert win["digest"] == digest(RIGHT), win
    assert (win["legs"], win["support"], win["votes"], win["holders"]) == ([1, 2, 3], 4, 1, 3)
    assert win["tie_break"] is None and doc["degraded"] == []
    legs = doc["rounds"][1]["legs"]
    for leg in legs[:3]:  # declined: recorded as such, neither a vote nor a problem
        assert (leg["declined"], leg["vote"], leg["vote_problem"]) == (True, None, None)
    assert legs[3]["declined"] is False
    assert legs[3]["vote"]["answer_digest"] == digest(RIGHT)
    assert [(v["voter"], v["declined"]) for v in doc["votes"][1]] == \
        [(1, True), (2, True), (3, True), (4, False)]
    human = invoke(["fanout", "-m", ",".join(f"scripted/{m}" for m in MODELS), "-p", "Q?",
                    "--tools", "none", "--rounds", "2"])
    assert "round 2: 4 legs · 0 changed · 1 vote · 3 declined" in human.stderr
    # orch ui's deliberation page (rendered in-process) says the same
    from orchestrator.ui.views import View

    page = View(orch_home / "runs", cache_dir=tmp_path / "ui")(
        f"/deliberation/{doc['wave_id']}", {}).body.decode()
    assert re.search(r'winner by support: .*with support\s*<b id="winner-support">4</b>',
                     page), page[:3000]
    assert page.count(">declined</span>") == 3 and page.count(">declined</td>") == 3
    assert ("Winner by support: scripted/m1, scripted/m2, scripted/m3 (support 4: held by 3 "
            "of 4 legs + 1 vote from other legs in round 2)") in human.stdout


def test_a_round_where_every_leg_declines_is_read_not_degraded(orch, scripted_server):
    """Every leg holds a different answer and judges its own best: each declines. That is a
    readable round (exit 0, stopped unchanged), not "no vote could be read"; the winner is
    by holders, ties broken as before."""
    orch.provider()
    for k, m in enumerate(MODELS):
        scripted_server.script(m, obedient(f"The answer is {17 + k}.", f"{17 + k}"))
    result = deliberate("--rounds", "3")
    doc = json.loads(result.stdout)
    assert result.exit_code == 0, doc["degraded"]
    assert doc["stop"]["rule"] == "unchanged" and doc["degraded"] == []
    legs = doc["rounds"][1]["legs"]
    assert all(leg["declined"] and leg["vote_problem"] is None for leg in legs)
    assert doc["winner"]["legs"] == [1] and doc["winner"]["support"] == 1
    assert doc["winner"]["tie_break"] == "the answer held by the leg earliest in --models"
