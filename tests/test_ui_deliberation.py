"""``orch ui``'s deliberation page in a real headless Chromium, over a scripted
``orch fanout --rounds`` run: each round's legs with their answers, what changed, the votes,
the winner and the stop rule, all as the run's records say; a leg's hostile answer (a
``<script>``, an ``<img onerror>``, a ``javascript:`` link) shown as text, inert."""

from __future__ import annotations

import json

import pytest
from test_deliberation import MODELS, USAGE, block, quoted
from test_ui import HOSTILE
from ui_browser import Chromium, OrchUI

from orchestrator.testing.daemon import invoke
from orchestrator.testing.scripted_server import Reply

ROUND1 = {
    "gpt-4o": "Keep a dict and a doubly linked list.",
    "qwen3-coder": HOSTILE,
    "llama-3-70b": "Use functools.lru_cache(maxsize=128) on the function.",
}


def leg(model: str):
    """Round 1: its answer (qwen's hostile); round 2: gpt adopts the lru_cache answer, qwen
    revises (a new hostile answer), llama keeps; each votes for the lru_cache answer (llama
    for the first it is shown); round 3: every leg keeps."""

    def reply(body, n):
        prompt = body["messages"][-1]["content"]
        if n == 0:
            return Reply(text=ROUND1[model], usage=USAGE)
        shown = quoted(prompt)
        lru = next((lb for lb, text in shown.items() if "lru_cache" in text), None)
        vote = lru or sorted(shown)[0]
        if n == 1 and model == "gpt-4o":
            return Reply(text=block(decision="adopt", adopt=lru, vote=lru,
                                    reason="<b>the standard library</b> does this"),
                         usage=USAGE)
        if n == 1 and model == "qwen3-coder":
            return Reply(text="Revised: <script>window.pwned = 9</script> use an OrderedDict."
                              "\n\n" + block(decision="revise", vote=vote, reason="fewer lines"),
                         usage=USAGE)
        return Reply(text="Mine stands.\n" + block(decision="keep", vote=vote,
                                                    reason="clear and correct"), usage=USAGE)
    return reply


@pytest.fixture
def deliberation(orch, scripted_server):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    for model in MODELS:
        scripted_server.script(model, leg(model))
    result = invoke(["fanout", "-m", ",".join(f"scripted/{m}" for m in MODELS), "-p",
                     "How do I build an LRU cache in Python?", "--json", "--tools", "none",
                     "--rounds", "4"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["kind"] == "deliberation" and doc["stop"]["rule"] == "unchanged"
    return doc


@pytest.fixture
def ui():
    server = OrchUI()
    yield server
    server.stop()


@pytest.fixture
def browser(tmp_path):
    chrome = Chromium(tmp_path / "chromium-profile")
    yield chrome
    chrome.close()


def test_the_deliberation_page_shows_rounds_changes_votes_winner_and_stop(
        deliberation, ui, browser, tmp_path):
    doc = deliberation
    run_id = doc["wave_id"]
    # the runs page lists it as a deliberation, its link opens the rounds
    browser.open(ui.url.replace("/?", "/?kind=deliberation&"))
    assert browser.eval("[...document.querySelectorAll('tr.run td:nth-child(2)')]"
                        ".map(td => td.textContent)") == ["deliberation"]
    browser.eval("document.querySelector('tr.run a').click()")
    browser.wait_for(f"location.pathname === '/deliberation/{run_id}'")
    browser.wait_for("document.readyState === 'complete' && !!document.getElementById('votes')")
    rounds = browser.eval("""[...document.querySelectorAll('section.round')].map(s => ({
        round: +s.dataset.round,
        legs: [...s.querySelectorAll('tr.round-leg')].map(r => ({
            leg: +r.dataset.leg,
            decision: r.querySelector('[data-field=decision]').textContent,
            changed: r.querySelector('[data-field=changed]').textContent,
            answer: r.querySelector('[data-field=answer]').textContent,
            vote: r.querySelector('[data-field=vote]').textContent,
            cost: r.querySelector('[data-field=cost]').textContent}))}))""")
    assert [r["round"] for r in rounds] == [r["round"] for r in doc["rounds"]] == [1, 2, 3]
    from orchestrator.ui.render import money

    names: dict[str, str] = {}
    for shown, rec in zip(rounds, doc["rounds"], strict=True):
        for row, leg_rec in zip(shown["legs"], rec["legs"], strict=True):
            assert row["leg"] == leg_rec["leg"]
            # one digest, one name, in every round and in the vote column
            assert names.setdefault(leg_rec["answer_digest"], row["answer"]) == row["answer"]
            assert row["cost"] == money(leg_rec["cost_usd"])
            expected = {True: "yes", False: "no", None: "—"}[leg_rec["changed"]]
            assert row["changed"] == expected
            if leg_rec["vote"]:
                assert f"leg {leg_rec['vote']['leg']}" in row["vote"]
                assert names.get(leg_rec["vote"]["answer_digest"],
                                 row["vote"].split("(")[-1][:-1]) in row["vote"]
    assert [r["decision"] for r in rounds[1]["legs"]] == ["adopt", "revise", "keep"]
    assert [r["changed"] for r in rounds[1]["legs"]] == ["yes", "yes", "no"]
    assert [r["changed"] for r in rounds[2]["legs"]] == ["no", "no", "no"]
    assert len(set(names.values())) == 4  # three first answers and qwen's revision
    # each leg's answer per round, in its own words: gpt's round-2 answer is llama's
    answer = "document.querySelector('#answer-{} .answer').textContent"
    assert "lru_cache" in browser.eval(answer.format("2-1"))
    assert "doubly linked" in browser.eval(answer.format("1-1"))
    assert "OrderedDict" in browser.eval(answer.format("2-2"))
    # the vote matrix: one row per leg, one column per round, as the records say
    matrix = browser.eval("""[...document.querySelectorAll('#votes tr.voter')].map(
        tr => [...tr.querySelectorAll('td')].map(td => td.textContent))""")
    for row, n in zip(matrix, (1, 2, 3), strict=True):
        for cell, rec in zip(row, doc["rounds"], strict=True):
            vote = next(leg_rec["vote"] for leg_rec in rec["legs"] if leg_rec["leg"] == n)
            assert (f"leg {vote['leg']}" in cell) if vote else cell == "—"
    # the winner and the stop rule
    assert browser.eval("document.getElementById('stop-rule').textContent") == "unchanged"
    assert browser.eval("document.getElementById('stop-round').textContent") == "3"
    assert browser.eval("+document.getElementById('winner-votes').textContent") == \
        doc["winner"]["votes"]
    assert browser.eval("document.getElementById('winner-answer').textContent") == \
        names[doc["winner"]["digest"]]
    assert browser.eval("document.getElementById('winner-models').textContent") == \
        ", ".join(doc["winner"]["models"])
    browser.screenshot(tmp_path / "deliberation.png")
    # hostile text, in the answers, the replies and a vote's reason, is inert text
    browser.eval("document.querySelectorAll('details').forEach(d => d.open = true)")
    assert browser.eval("typeof window.pwned") == "undefined"
    assert browser.eval("document.scripts.length") == 0
    assert browser.eval("document.querySelectorAll('[onerror], iframe, object, embed, "
                        "main b b').length") == 0
    hrefs = browser.eval("[...document.querySelectorAll('a')].map(a => a.getAttribute('href'))")
    assert not [h for h in hrefs if h and h.lower().startswith(("javascript:", "data:"))]
    text = browser.eval("document.getElementById('answer-1-2').textContent")
    assert "<script>window.pwned = 1</script>" in text and "onerror" in text
    assert "<script>window.pwned = 9</script>" in browser.eval(answer.format("2-2"))
    assert "<b>the standard library</b>" in browser.eval("document.body.textContent")
    browser.eval("[...document.querySelectorAll('.answer a')].forEach(a => a.click())")
    assert browser.eval("typeof window.pwned") == "undefined"
    # the wave page links to the rounds
    browser.open(f"{ui.base}/wave/{run_id}")
    assert browser.eval("document.getElementById('rounds-link').getAttribute('href')") == \
        f"/deliberation/{run_id}"


def test_a_wave_is_no_deliberation_page(orch, scripted_server, ui):
    from test_ui import get

    scripted_server.script("alpha", Reply(text="plain"))
    wave_id = orch.run_wave(["alpha"], "Plain.").doc["wave_id"]
    cookie = f"orch_ui_{ui.port}={ui.token}"
    assert get(ui, f"/deliberation/{wave_id}", cookie=cookie).status == 404
    assert get(ui, f"/deliberation/{wave_id}").status == 403
    assert get(ui, "/deliberation/nope", cookie=cookie).status == 404
