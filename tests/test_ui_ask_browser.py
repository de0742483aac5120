"""The ask page in a real headless Chromium against the real ``orch ui`` (a child process),
the scripted server on 127.0.0.1 and a real SQLite ledger: type a question, watch both legs'
answers appear (streamed when legs stream their text, else at each leg's end), ask a
follow-up, and check the ledger's rows for both waves and the follow-up's link to its parent.
One test: the whole flow (the guard's refusals are in-process in tests/test_ui_ask.py)."""

from __future__ import annotations

import json
import subprocess

import pytest
from ledger_rows import ledger_rows
from ui_browser import Chromium, OrchUI

from orchestrator.testing.scripted_server import Reply

HOSTILE = '<img src="x" onerror="window.pwned = 1"><script>window.pwned = 2</script> red'


@pytest.fixture
def browser(tmp_path):
    chrome = Chromium(tmp_path / "chromium-profile")
    yield chrome
    chrome.close()


def type_into(browser: Chromium, element_id: str, text: str) -> None:
    """Focus the field and type, as a user would (DevTools' Input.insertText)."""
    browser.eval(f"document.getElementById({json.dumps(element_id)}).focus()")
    browser.call("Input.insertText", text=text)


def test_ask_watch_both_legs_then_follow_up_and_the_ledger_agrees(
        orch, scripted_server, orch_home, tmp_path, browser, monkeypatch):
    orch.provider(input_cost_per_mtok=3.0, output_cost_per_mtok=15.0)
    orch.config(defaults={"models": ["scripted/alpha", "scripted/bravo"]})
    scripted_server.script("alpha", Reply(text="Alpha says blue."),
                           Reply(text="Alpha again: still blue."))
    scripted_server.script("bravo", Reply(text=HOSTILE), Reply(text="Bravo again: red."))
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    monkeypatch.chdir(project)  # orch ui's workspace: the work tree it starts in
    ui = OrchUI("--no-daemon")
    try:
        browser.open(ui.url)  # the token becomes the cookie
        browser.open(f"{ui.base}/ask")
        browser.eval("document.querySelectorAll('input[name=model]').forEach(b => b.click())")
        type_into(browser, "prompt", "Which colour is the sky?")
        type_into(browser, "budget-max_cost", "5")  # a per-run budget, as --max-cost 5
        browser.eval("document.getElementById('ask-button').click()")
        browser.wait_for("location.pathname.startsWith('/ask/')")
        first = browser.eval("location.pathname").rsplit("/", 1)[1]
        browser.wait_for("document.querySelectorAll('section.leg[data-ended=yes]').length == 2",
                         timeout=60)
        texts = browser.eval("[...document.querySelectorAll('section.leg pre.answer')]"
                             ".map(p => p.textContent)")
        assert sorted(texts) == sorted(["Alpha says blue.", HOSTILE])
        streamed = browser.eval("document.querySelectorAll('section.leg[data-streamed=yes]')"
                                ".length")
        # the page watches: both legs asked for a stream, and their text came as LegText
        # events before each leg's end
        assert all(r.body.get("stream") is True for r in scripted_server.chats)
        assert streamed == 2
        # hostile model text stayed text: no element made of it, nothing ran
        assert browser.eval("document.querySelectorAll('#legs img, #legs script').length") == 0
        assert browser.eval("typeof window.pwned") == "undefined"
        # the run ends after its legs do (its record written): the page says so when it has
        browser.wait_for("document.getElementById('run-status').textContent == 'complete'",
                         timeout=30)
        assert browser.eval("document.getElementById('run-cost').textContent") != "$0.0000"
        # the follow-up: the same legs, each with its own conversation
        browser.wait_for("!document.getElementById('follow-form').hidden")
        browser.screenshot(tmp_path / "ui-ask.png")
        type_into(browser, "follow-prompt", "And at night?")
        browser.eval("document.getElementById('follow-button').click()")
        browser.wait_for(f"location.pathname.startsWith('/ask/') && "
                         f"!location.pathname.includes({json.dumps(first)})")
        second = browser.eval("location.pathname").rsplit("/", 1)[1]
        browser.wait_for("document.querySelectorAll('section.leg[data-ended=yes]').length == 2",
                         timeout=60)
        texts = browser.eval("[...document.querySelectorAll('section.leg pre.answer')]"
                             ".map(p => p.textContent)")
        assert sorted(texts) == ["Alpha again: still blue.", "Bravo again: red."]
        assert browser.eval("document.getElementById('parent').textContent") == first
        assert browser.eval("typeof window.pwned") == "undefined"
    finally:
        ui.stop()
    # the wire: each follow-up request carried that leg's own conversation, then the question
    follow = {r.model.rsplit("/", 1)[-1]: r.body["messages"]
              for r in scripted_server.chats[2:]}
    assert [m["content"] for m in follow["alpha"] if m["role"] == "assistant"] == [
        "Alpha says blue."]
    assert [m["content"] for m in follow["bravo"] if m["role"] == "assistant"] == [HOSTILE]
    assert follow["alpha"][-1]["role"] == "user"
    assert follow["alpha"][-1]["content"].strip() == "And at night?"
    assert "Which colour is the sky?" in json.dumps(follow["alpha"])
    # the ledger: both waves, two legs each, billed; the follow-up names its parent
    rows = ledger_rows(orch_home)
    by_wave = {}
    for row in rows:
        by_wave.setdefault(row["wave_id"], []).append(row)
    assert set(by_wave) == {first, second}
    assert all(len(legs) == 2 for legs in by_wave.values())
    assert all(r["status"] == "complete" and r["cost_usd"] > 0 for r in rows)
    assert {r["model"] for r in by_wave[second]} == {"scripted/alpha", "scripted/bravo"}
    asked = json.loads((orch_home / "runs" / first / "wave.json").read_text())
    assert asked["options"]["max_cost"] == 5.0  # the form's budget reached the run
    doc = json.loads((orch_home / "runs" / second / "wave.json").read_text())
    assert doc.get("parent_wave_id") == first
    if "parent_wave_id" in rows[0]:  # the ledger's own link, when `continue` has added it
        assert {r["parent_wave_id"] for r in by_wave[second]} == {first}
