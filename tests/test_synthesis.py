"""``orch fanout --chair M --synthesis structured`` end to end on the scripted server: the
chair reads the answers under anonymous labels, writes a fenced block orch reads (strictly,
with json-repair, or after one repair prompt) and maps back to legs, in ``--json``, the
terminal and the ledger; a chair whose block stays unreadable leaves its prose and exit 2."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from orchestrator.testing.daemon import invoke
from orchestrator.testing.scripted_server import Reply

ANSWERS = {"gpt-4o": "As GPT-4o: evict the least recently used entry.",
           "qwen3-coder": "Evict the oldest entry (FIFO); Qwen thinks that is simpler.",
           "llama-3-70b": "Evict the least recently used entry, and lock it for threads."}
IDENTIFYING = re.compile(r"gpt|openai|qwen|alibaba|llama|meta\b", re.I)


def shown(packet: str) -> dict[str, str]:
    """label -> the answer quoted under it in the chair's packet."""
    return {m.group(1): m.group(2) for m in re.finditer(
        r"### (Answer [A-Z])[^\n]*\n\n<<<seat-text \w+\n(.*?)\nseat-text \w+>>>", packet, re.S)}


def label_of(packet: str, needle: str) -> str:
    return next(label for label, text in shown(packet).items() if needle in text)


def block_for(packet: str) -> dict:
    lru, fifo, lock = (label_of(packet, w) for w in ("least recently used entry.",
                                                       "FIFO", "threads"))
    return {"consensus": ["an eviction policy is needed"],
            "disagreements": [{"point": "which entry to evict",
                               "sides": [{"position": "least recently used",
                                          "answers": [lru, lock.split()[-1]]},
                                         {"position": "oldest first", "answers": [fifo]}]}],
            "unique": [{"point": "thread safety", "answer": lock}],
            "resolution": "LRU: it keeps the hot entries."}


def script(server, chair):
    for model, text in ANSWERS.items():
        server.script(model, Reply(text=text))
    server.script("chair", chair)


def run(*extra):
    return invoke(["fanout", "-m", ",".join(f"scripted/{m}" for m in ANSWERS), "-p",
                   "How should my cache evict?", "--tools", "none", "--chair", "scripted/chair",
                   "--synthesis", "structured", *extra])


def test_a_structured_synthesis_is_read_and_mapped_back_to_legs(orch, scripted_server):
    orch.provider()

    def chair(body, n):
        packet = body["messages"][-1]["content"]
        return Reply(text="My synthesis.\n\n```json\n" + json.dumps(block_for(packet))
                     + "\n```")

    script(scripted_server, chair)
    result = run("--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    packet = scripted_server.requests_for("chair")[0].body["messages"][-1]["content"]
    assert not IDENTIFYING.search(packet.split("## The answers", 1)[1]), packet
    assert sorted(shown(packet)) == ["Answer A", "Answer B", "Answer C"]
    syn = doc["synthesis"]
    assert syn["source"] == "block" and syn["problem"] is None and syn["prose"] == "My synthesis."
    models = {label: v["model"] for label, v in syn["labels"].items()}
    lru, fifo = syn["disagreements"][0]["sides"]
    assert sorted(models[a] for a in lru["answers"]) == ["scripted/gpt-4o",
                                                         "scripted/llama-3-70b"]
    assert [models[a] for a in fifo["answers"]] == ["scripted/qwen3-coder"]
    assert models[syn["unique"][0]["answer"]] == "scripted/llama-3-70b"
    assert syn["resolution"] == "LRU: it keeps the hot entries."
    # the terminal: each section, labels with the model behind them
    human = run()
    assert human.exit_code == 0, human.output
    out = human.stdout
    assert "Structured synthesis (read from its block):" in out
    assert "Consensus:\n  - an eviction policy is needed" in out
    assert re.search(r"Answer [ABC] \(scripted/qwen3-coder\): oldest first", out)
    assert re.search(r"Raised by one answer:\n  - Answer [ABC] \(scripted/llama-3-70b\): "
                     r"thread safety", out)
    assert "Resolution: LRU: it keeps the hot entries." in out


def test_broken_json_is_repaired_then_re_prompted_once(orch, scripted_server, orch_home):
    """The chair's first block cannot be mended (no block at all); the repair prompt's
    answer is a block json-repair must mend (single quotes, a trailing comma, no closing
    brace or fence): read, source re-prompt, both chair requests billed with the wave."""
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    script(scripted_server, Reply(text="My synthesis, with no block at all."))
    scripted_server.script("chair", Reply(text="My synthesis, with no block at all."),
                           Reply(text="```json\n{'consensus': ['evict something',], "
                                      "'resolution': 'LRU wins'"))
    result = run("--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    syn = doc["synthesis"]
    assert syn["source"] == "re-prompt" and syn["problem"] is None
    assert syn["consensus"] == ["evict something"] and syn["resolution"] == "LRU wins"
    assert syn["prose"] == "My synthesis, with no block at all."
    repair = scripted_server.requests_for("chair")[1].body["messages"][-1]["content"]
    assert "could not be read: there is no JSON block" in repair and "Answer A" in repair
    assert doc["chair_repair"]["leg_id"] == f"{doc['wave_id']}-chair-repair"
    con = sqlite3.connect(orch_home / "ledger.db")
    costs = dict(con.execute("select leg_id, cost_usd from spend"))
    assert len(costs) == 5 and doc["cost_usd"] == pytest.approx(sum(costs.values()))


def test_a_block_that_stays_unreadable_leaves_the_prose_and_exit_2(orch, scripted_server):
    orch.provider()
    script(scripted_server, Reply(text="Prose only, twice. {{{ not json"))
    result = run("--json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 2 and doc["status"] == "complete"
    assert doc["synthesis"]["problem"] and doc["chair"]["answer"].startswith("Prose only")
    assert any("structured synthesis could not be read" in d for d in doc["degraded"])
    assert len(scripted_server.requests_for("chair")) == 2  # one repair prompt, not more


@pytest.mark.parametrize("args,says", [
    (["--synthesis", "structured"], "add --chair MODEL"),
    (["--synthesis", "structured", "--chair", "scripted/chair", "--rounds", "2"],
     "drop --rounds or --synthesis"),
])
def test_a_structured_synthesis_needs_a_one_round_chair(orch, scripted_server, args, says):
    orch.provider()
    result = invoke(["fanout", "-m", "scripted/a,scripted/b", "-p", "Q?", *args])
    assert result.exit_code == 2 and says in result.output
    assert scripted_server.count() == 0


def test_the_wave_page_shows_the_structured_synthesis_and_the_vote(orch, scripted_server,
                                                                   tmp_path):
    """``orch ui`` in a real headless Chromium: the structured synthesis (labels with the
    models behind them) and the vote, with the chair's hostile text inert."""
    from test_ui import HOSTILE
    from ui_browser import Chromium, OrchUI

    orch.provider()

    def chair(body, n):
        block = block_for(body["messages"][-1]["content"])
        block["resolution"] = "LRU. " + HOSTILE
        block["consensus"].append("<img src=x onerror=\"window.pwned = 5\">")
        return Reply(text="My synthesis.\n\n```json\n" + json.dumps(block) + "\n```")

    script(scripted_server, chair)
    doc = json.loads(run("--json", "--aggregate", "vote").stdout)
    ui, browser = OrchUI(), Chromium(tmp_path / "chromium-profile")
    try:
        browser.open(ui.url.replace("/?", f"/wave/{doc['wave_id']}?"))
        browser.wait_for("!!document.getElementById('structured')")
        consensus = browser.eval("[...document.querySelectorAll('#consensus li')]"
                                 ".map(li => li.textContent)")
        assert consensus[0] == "an eviction policy is needed"
        assert 'onerror="window.pwned = 5"' in consensus[1]  # shown as text
        sides = browser.eval("[...document.querySelectorAll('#disagreements li.side')]"
                             ".map(li => li.textContent)")
        assert any("(scripted/qwen3-coder)" in s and "oldest first" in s for s in sides), sides
        assert "<script>window.pwned = 1</script>" in browser.eval(
            "document.getElementById('resolution').textContent")
        assert browser.eval("typeof window.pwned") == "undefined"
        assert browser.eval("document.querySelectorAll('[onerror], script').length") == 0
        outcome = browser.eval("document.getElementById('vote-outcome').textContent")
        assert "tie" in outcome and "3 of 3 legs answered" in outcome  # three answers
        assert "tie broken by the answer held by the leg earliest in --models" in outcome
        assert browser.eval("document.getElementById('vote-models').textContent") == \
            "scripted/gpt-4o"
        browser.screenshot(tmp_path / "structured.png")
    finally:
        browser.close()
        ui.stop()
