"""The follow-up from ``orch ui``'s recorded wave page (``/wave/ID``), in-process over HTTP (the
scripted server on 127.0.0.1, a real SQLite ledger): a wave that can be followed up shows the
box and one that cannot does not (the app's own refusals decide); the box posts to the live
page's follow-up route, so each leg is asked again with its own conversation and the ledger
holds the new wave with its parent; every hostile POST to it is refused with nothing sent or
recorded; and a follow-up keeps the budgets its wave ran with (the CLI's ``--continue`` and the
page alike, through ``follow_up``) unless its box sets its own."""

from __future__ import annotations

import html
import json
import re

import test_ui_ask
from click.testing import CliRunner
from test_ui_ask import hostile_posts, ledger_rows, waves

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

ui = test_ui_ask.ui  # the fixture: orch ui's server in this process
QUESTION = "Which colour?\nSay it in one word."


def cli_wave(scripted_server, *extra: str) -> str:
    """A wave recorded by ``orch fanout`` (another process's run: no live page here)."""
    scripted_server.script("alpha", Reply(text="alpha says blue"))
    scripted_server.script("bravo", Reply(text="bravo says red"))
    done = CliRunner().invoke(cli, ["fanout", "-m", "scripted/alpha,scripted/bravo", "-p",
                                    QUESTION, "--tools", "none", "--json", *extra])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)["wave_id"]


def get(ui, path: str):
    return ui.request("GET", path, headers={"Cookie": ui.cookie})


def box_token(ui, wave_id: str) -> str:
    page = get(ui, f"/wave/{wave_id}").body.decode()
    form = re.search(r'<form method="post" action="([^"]+)" id="follow-form">(.*?)</form>',
                     page, re.S)
    assert form, page[-3000:]
    assert form[1] == f"/ask/{wave_id}/follow-up"  # the live page's own route
    return re.search(r'name="form_token" value="([^"]+)"', form[2])[1]


def conversation(request) -> list[tuple[str, str]]:
    return [(m["role"], (m["content"] if isinstance(m["content"], str) else json.dumps(
        m["content"])).strip()) for m in request.body["messages"] if m["role"] != "system"]


def test_a_recorded_wave_offers_the_follow_up_and_it_asks_each_leg_with_its_own_conversation(
        ui, scripted_server, orch_home):
    parent = cli_wave(scripted_server)
    token = box_token(ui, parent)
    page = get(ui, f"/wave/{parent}").body.decode()
    assert 'name="budget.max_cost"' in page  # the ask form's budget fields, a fanout's
    scripted_server.script("alpha", Reply(text="alpha: navy"))
    scripted_server.script("bravo", Reply(text="bravo: crimson"))
    sent = scripted_server.count()
    resp = ui.post(f"/ask/{parent}/follow-up", {"prompt": "Which shade?"}, token=token)
    assert resp.status == 303, resp.body[:2000]
    child = resp.getheader("Location").removeprefix("/ask/")
    assert resp.getheader("Location") == f"/ask/{child}"  # the new run's live page
    assert ui.wait(child)[-1] == {"type": "ended", "exit_code": 0}
    live = get(ui, f"/ask/{child}").body.decode()
    assert f'href="/ask/{parent}"' in live and 'id="follow-form"' in live
    asked = scripted_server.chats[sent:]
    assert len(asked) == 2
    for request in asked:
        model = request.body["model"].rsplit("/", 1)[-1]
        turns = conversation(request)
        assert turns[-1] == ("user", "Which shade?")
        assert turns[-2] == ("assistant", f"{model} says {'blue' if model == 'alpha' else 'red'}")
        assert QUESTION in turns[-3][1] and turns[-3][0] == "user"
        assert not any("says" in text for role, text in turns[:-2])  # never the other leg's
    doc = json.loads((orch_home / "runs" / child / "wave.json").read_text())
    assert doc["parent_wave_id"] == parent
    rows = [r for r in ledger_rows(orch_home) if r["wave_id"] == child]
    assert len(rows) == 2 and {r["parent_wave_id"] for r in rows} == {parent}
    # the parent's page now links its follow-up; a token is good once
    assert f'href="/wave/{child}"' in get(ui, f"/wave/{parent}").body.decode()
    again = ui.post(f"/ask/{parent}/follow-up", {"prompt": "Which shade?"}, token=token)
    assert again.status == 403 and scripted_server.count() == sent + 2


def test_a_wave_that_cannot_be_followed_up_shows_no_box(ui, scripted_server, orch_home):
    scripted_server.script("alpha", Reply(status=400, error_message="alpha refuses"))
    scripted_server.script("bravo", Reply(status=400, error_message="bravo refuses"))
    done = CliRunner().invoke(cli, ["fanout", "-m", "scripted/alpha,scripted/bravo", "-p",
                                    QUESTION, "--tools", "none", "--json"])
    failed = json.loads(done.stdout)["wave_id"]
    page = get(ui, f"/wave/{failed}")
    assert page.status == 200 and b'id="follow-form"' not in page.body
    scripted_server.script("alpha", Reply(text="a"), Reply(text="a2"))
    scripted_server.script("bravo", Reply(text="b"), Reply(text="b2"))
    done = CliRunner().invoke(cli, ["fanout", "-m", "scripted/alpha,scripted/bravo", "-p",
                                    QUESTION, "--tools", "none", "--rounds", "2", "--json"])
    assert json.loads(done.stdout)["kind"] == "deliberation", done.output  # (degraded: 2)
    deliberation = json.loads(done.stdout)["wave_id"]
    page = get(ui, f"/wave/{deliberation}")
    assert page.status == 200 and b'id="follow-form"' not in page.body
    # posting anyway is the app's one line, nothing sent
    sent = scripted_server.count()
    resp = ui.post(f"/ask/{failed}/follow-up", {"prompt": "And?"},
                   token=ui.server.forms.issue(f"/ask/{failed}/follow-up"))
    assert resp.status == 400 and b"--retry-failed" in resp.body
    assert scripted_server.count() == sent


def test_every_hostile_post_to_the_recorded_pages_box_is_refused_with_nothing_sent(
        ui, scripted_server, orch_home):
    parent = cli_wave(scripted_server)
    sent, rows = scripted_server.count(), len(ledger_rows(orch_home))
    hostile_posts(ui, f"/ask/{parent}/follow-up", {"prompt": "Which shade?"},
                  lambda: box_token(ui, parent))
    assert scripted_server.count() == sent and len(ledger_rows(orch_home)) == rows
    assert len(waves(orch_home)) == 1
    # a bad budget in the box is the ask form's one line, nothing sent
    for fields, words in (({"budget.max_cost": "nan"}, "is not a finite number"),
                          ({"budget.no_such": "1"}, "--no-such is not an option of fanout"),
                          ({"max_cost": "1"}, "the form has no field 'max_cost'")):
        resp = ui.post(f"/ask/{parent}/follow-up", {"prompt": "And?", **fields},
                       token=box_token(ui, parent))
        assert resp.status == 400 and words in html.unescape(resp.body.decode()), fields
    assert scripted_server.count() == sent and len(waves(orch_home)) == 1


def test_a_follow_up_keeps_its_waves_budgets_unless_its_box_sets_its_own(
        ui, scripted_server, orch_home):
    """``--output-budget`` shapes each request (``max_tokens`` on the wire): the wave's, kept
    by a follow-up from the page and by ``orch fanout --continue``; the box's own wins."""
    parent = cli_wave(scripted_server, "--output-budget", "77")
    assert {r.body.get("max_tokens") for r in scripted_server.chats} == {77}

    def follow(fields: dict) -> tuple[set, dict]:
        scripted_server.script("alpha", Reply(text="alpha: navy"))
        scripted_server.script("bravo", Reply(text="bravo: crimson"))
        sent = scripted_server.count()
        resp = ui.post(f"/ask/{parent}/follow-up", {"prompt": "Which shade?", **fields},
                       token=box_token(ui, parent))
        assert resp.status == 303, resp.body[:2000]
        child = resp.getheader("Location").removeprefix("/ask/")
        ui.wait(child)
        doc = json.loads((orch_home / "runs" / child / "wave.json").read_text())
        return {r.body.get("max_tokens") for r in scripted_server.chats[sent:]}, doc

    wire, doc = follow({})
    assert wire == {77} and doc["options"]["output_budget"] == 77
    wire, doc = follow({"budget.output_budget": "55"})
    assert wire == {55} and doc["options"]["output_budget"] == 55
    # the CLI's --continue keeps it the same way (the one function, follow_up)
    scripted_server.script("alpha", Reply(text="alpha: navy"))
    scripted_server.script("bravo", Reply(text="bravo: crimson"))
    sent = scripted_server.count()
    done = CliRunner().invoke(cli, ["fanout", "--continue", parent, "Which shade?", "--json"])
    assert done.exit_code == 0, done.output
    assert {r.body.get("max_tokens") for r in scripted_server.chats[sent:]} == {77}
    assert json.loads(done.stdout)["options"]["output_budget"] == 77
