"""``orch ui``'s ask page, in-process over HTTP (the server's own thread, the scripted server on
127.0.0.1, a real SQLite ledger): the POST guard refuses every hostile request with nothing
sent and nothing recorded; a good form runs through the app's prepare and start (the CLI's
checks: a bad value is the CLI's one line, nothing sent); the routes that start runs call
only the app's prepare/start (AST, shown to fail on a bypass); the runs page lists each run's
question and models. The browser flow (ask, watch, follow up) is tests/test_ui_ask_browser.py."""

from __future__ import annotations

import ast
import http.client
import json
import re
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
from ledger_rows import ledger_rows

from orchestrator.testing.scripted_server import Reply

ROOT = Path(__file__).resolve().parents[1]
PRICES = {"input_cost_per_mtok": 3.0, "output_cost_per_mtok": 15.0}


class InProcess:
    """orch ui's server in this process, over ``runs`` and a workspace folder."""

    def __init__(self, runs: Path, workspace: Path) -> None:
        from orchestrator.ui.server import UIServer
        from orchestrator.ui.views import View

        self.view = View(runs, workspace=workspace)
        self.server = UIServer(self.view)
        self.server.start()
        self.port, self.token = self.server.port, self.server.token
        self.cookie = f"orch_ui_{self.port}={self.token}"
        self.origin = f"http://127.0.0.1:{self.port}"

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=20)
        conn.request(method, path, body=body, headers={"Host": f"127.0.0.1:{self.port}",
                                                       **(headers or {})})
        resp = conn.getresponse()
        resp.body = resp.read()
        conn.close()
        return resp

    def form_token(self, page: str = "/ask") -> str:
        resp = self.request("GET", page, headers={"Cookie": self.cookie})
        assert resp.status == 200, resp.body
        return re.search(rb'name="form_token" value="([^"]+)"', resp.body)[1].decode()

    def post(self, path: str, fields: dict, *, token: str | None = None,
             headers: dict[str, str] | None = None, drop: tuple[str, ...] = ()):
        fields = dict(fields)
        if token is not None:
            fields["form_token"] = token
        body = urlencode(fields, doseq=True).encode()
        sent = {"Cookie": self.cookie, "Origin": self.origin,
                "Content-Type": "application/x-www-form-urlencoded", **(headers or {})}
        for name in drop:
            sent.pop(name, None)
        return self.request("POST", path, body, sent)

    def wait(self, run_id: str, timeout: float = 60) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            live = self.view.ask.live.get(run_id)
            if live is not None and live.done:
                return live.events
            time.sleep(0.05)
        raise AssertionError(f"run {run_id} did not end in {timeout}s")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def ui(orch, scripted_server, orch_home, tmp_path):
    orch.provider(**PRICES)
    orch.config(defaults={"models": ["scripted/alpha", "scripted/bravo"]})
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "notes.md").write_text("The notes say: blue.\n")
    (tmp_path / "secret.txt").write_text("outside the workspace\n")
    (workspace / "link.md").symlink_to(tmp_path / "secret.txt")  # inside by name only
    server = InProcess(orch_home / "runs", workspace)
    yield server
    server.close()


def waves(home: Path) -> list[Path]:
    return sorted((home / "runs").glob("*/wave.json")) if (home / "runs").exists() else []


ASK = {"kind": "fanout", "model": ["scripted/alpha", "scripted/bravo"],
       "prompt": "Which colour?\nSay it in one word."}


def hostile_posts(ui, path: str, fields: dict, token_of) -> None:
    """POST ``fields`` to ``path`` each hostile way (another origin, no cookie, a spent or
    another form's token...): each is refused (403/415). ``token_of()``: a good token for
    the form (from its page). The caller checks nothing was sent or recorded."""
    port = ui.port
    spent = token_of()  # a real token, spent
    ui.server.forms.take(spent, path)
    elsewhere = "/ask/x/follow-up" if path == "/ask" else "/ask"
    other_form = ui.server.forms.issue(elsewhere)  # good, but for another form's action
    cases = {
        "cross-origin": dict(headers={"Origin": "http://evil.example"}),
        "another port": dict(headers={"Origin": f"http://127.0.0.1:{port + 1}"}),
        "null origin": dict(headers={"Origin": "null"}),
        "no origin": dict(drop=("Origin",)),
        "cross-site fetch": dict(headers={"Sec-Fetch-Site": "cross-site"}),
        "wrong host": dict(headers={"Host": f"evil.example:{port}"}),
        "rebound host": dict(headers={"Host": "localhost.evil.example"}),
        "no cookie": dict(drop=("Cookie",)),
        "wrong cookie": dict(headers={"Cookie": f"orch_ui_{port}={ui.token[:-2]}xx"}),
        "no form token": dict(token=None),
        "wrong form token": dict(token="x" * 32),
        "spent form token": dict(token=spent),
        "another form's token": dict(token=other_form),
        "not a form": dict(headers={"Content-Type": "text/plain"}),
    }
    for why, how in cases.items():
        token = how.pop("token") if "token" in how else token_of()
        resp = ui.post(path, fields, token=token, **how)
        assert resp.status in (403, 415), (why, resp.status, resp.body)
        assert b"Set-Cookie" not in resp.body and ui.token.encode() not in resp.body
    # the token in the URL (no cookie) starts nothing either
    resp = ui.request("POST", f"{path}?token={ui.token}",
                      urlencode({**fields, "form_token": token_of()}, doseq=True).encode(),
                      {"Origin": ui.origin,
                       "Content-Type": "application/x-www-form-urlencoded"})
    assert resp.status == 403


def test_every_hostile_post_is_refused_with_nothing_sent_or_recorded(ui, scripted_server,
                                                                     orch_home):
    scripted_server.script("alpha", Reply(text="blue"))
    scripted_server.script("bravo", Reply(text="red"))
    hostile_posts(ui, "/ask", ASK, ui.form_token)
    assert scripted_server.count() == 0  # nothing on the wire
    assert waves(orch_home) == [] and ledger_rows(orch_home) == []  # nothing recorded
    # the same request, every check met, runs: the refusals above were the guard's
    token = ui.form_token()
    resp = ui.post("/ask", ASK, token=token)
    assert resp.status == 303, resp.body
    run_id = resp.getheader("Location").rsplit("/", 1)[1]
    events = ui.wait(run_id)
    assert events[-1] == {"type": "ended", "exit_code": 0}
    assert scripted_server.count() == 2
    assert {r["model"] for r in ledger_rows(orch_home)} == {"scripted/alpha", "scripted/bravo"}
    assert ui.post("/ask", ASK, token=token).status == 403  # a form token is good once
    assert scripted_server.count() == 2


def test_the_ask_form_takes_the_clis_checks_and_the_workspace_only(ui, scripted_server,
                                                                    orch_home):
    refused = {
        "--aggregate is one of": {**ASK, "aggregate": "nope"},
        "is outside the workspace": {**ASK, "context_other": "../secret.txt"},
        "link.md is outside the workspace": {**ASK, "context": "link.md"},
        "/etc/hostname is outside": {**ASK, "context_other": "/etc/hostname"},
        "does not exist": {**ASK, "context_other": "missing.md"},
        "more than --max-legs": {**ASK, "other_models": ",".join(f"scripted/m{n}"
                                                                  for n in range(12))},
        "the prompt is empty": {**ASK, "prompt": "  "},
    }
    for words, fields in refused.items():
        resp = ui.post("/ask", fields, token=ui.form_token())
        assert resp.status == 400, (words, resp.status)
        assert words.encode() in resp.body, (words, resp.body[:2000])
        assert b"form_token" in resp.body  # the form again, with a fresh token
    assert scripted_server.count() == 0 and ledger_rows(orch_home) == []
    # a context file inside the workspace goes into the briefing both legs get
    scripted_server.script("alpha", Reply(text="blue"))
    scripted_server.script("bravo", Reply(text="blue too"))
    resp = ui.post("/ask", {**ASK, "context": "notes.md"}, token=ui.form_token())
    assert resp.status == 303, resp.body
    ui.wait(resp.getheader("Location").rsplit("/", 1)[1])
    assert all("The notes say: blue." in json.dumps(r.body) for r in scripted_server.chats)


def test_a_follow_up_of_a_wave_where_no_leg_answered_is_one_line_and_sends_nothing(
        ui, scripted_server, orch_home):
    scripted_server.script("alpha", Reply(status=400, error_message="alpha refuses"))
    scripted_server.script("bravo", Reply(status=400, error_message="bravo refuses"))
    resp = ui.post("/ask", ASK, token=ui.form_token())
    run_id = resp.getheader("Location").rsplit("/", 1)[1]
    ui.wait(run_id)
    sent, rows = scripted_server.count(), len(ledger_rows(orch_home))
    page = f"/ask/{run_id}"
    resp = ui.post(f"{page}/follow-up", {"prompt": "And then?"}, token=ui.form_token(page))
    assert resp.status == 400
    assert b"--retry-failed" in resp.body, resp.body
    assert scripted_server.count() == sent and len(ledger_rows(orch_home)) == rows
    assert len(waves(orch_home)) == 1


def test_the_runs_page_shows_each_runs_question_and_models(orch, scripted_server, ui):
    scripted_server.script("alpha", Reply(text="ok"))
    scripted_server.script("bravo", Reply(text="ok"))
    orch.run_wave(["alpha", "bravo"], "\nWhat is <b>the</b> plan?\nmore lines")
    resp = ui.request("GET", "/", headers={"Cookie": ui.cookie})
    row = re.search(rb'<td class="question">(.*?)</td><td class="models">(.*?)</td>',
                    resp.body)
    assert row[1] == b"What is &lt;b&gt;the&lt;/b&gt; plan?"  # escaped, first line only
    assert row[2] == b"scripted/alpha, scripted/bravo"


# --- the routes that start runs call only the app's prepare and start ----------------------

ENTRY = {"prepare", "start", "follow_up"}  # orchestrator.app's
REQUESTS = {"Bench", "Council", "fanout"}  # the typed requests a form becomes
READS = ("orchestrator.app.search",)  # the search page's query: reads only
ASKS = {"refusal"}  # app.continuation's: may a wave be followed up (reads its record only)
# what runs or prepares a run besides the app's entry points (a page may read records:
# engine.rebuild, council.report_html, bakeoff.report and charts)
FORBIDDEN = ("orchestrator.engine.wave", "orchestrator.engine.leg", "orchestrator.engine.spec",
             "orchestrator.engine.ledger_sink", "orchestrator.council.run",
             "orchestrator.council.stage", "orchestrator.deliberation.run",
             "orchestrator.bakeoff.run", "orchestrator.bakeoff.plan", "orchestrator.app.wave",
             "orchestrator.app.council", "orchestrator.app.bench", "orchestrator.app.bench_run",
             "orchestrator.models.resolve", "orchestrator.briefing", "orchestrator.intake")


def run_starting_problems(sources: dict[str, str]) -> list[str]:
    """What in the UI's modules could start or check a run other than through the app's
    ``prepare``/``start``/``follow_up``: an import of the engine or of a kind's own prepare,
    or an ``orchestrator.app`` name outside those."""
    problems = []
    for name, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module.startswith(FORBIDDEN):
                    problems.append(f"{name}: imports {node.module}")
                elif node.module.startswith("orchestrator.app") and node.module not in READS:
                    extra = {a.name for a in node.names} - ENTRY - REQUESTS - ASKS
                    if extra:
                        problems.append(f"{name}: imports {sorted(extra)} from {node.module}")
            elif isinstance(node, ast.Import):
                bad = [a.name for a in node.names if a.name.startswith(FORBIDDEN)]
                problems += [f"{name}: imports {b}" for b in bad]
    return problems


def post_handlers(text: str) -> dict[str, set[str]]:
    """Each method of the ask page's class with the names it calls."""
    out = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef):
            out[node.name] = {c.func.attr if isinstance(c.func, ast.Attribute) else
                              getattr(c.func, "id", "") for c in ast.walk(node)
                              if isinstance(c, ast.Call)}
    return out


def test_the_run_starting_routes_call_only_the_apps_prepare_and_start(ui):
    from orchestrator.ui.views import View

    folder = ROOT / "orchestrator" / "ui"
    sources = {p.name: p.read_text() for p in folder.glob("*.py")}
    assert run_starting_problems(sources) == []
    # a bypass is caught: the engine run directly, a kind's own prepare
    assert run_starting_problems({"x.py": "from orchestrator.engine.wave import Wave\n"})
    assert run_starting_problems({"x.py": "from orchestrator.app.wave import prepare_fanout"})
    assert run_starting_problems({"x.py": "import orchestrator.council.run\n"})
    # the POST routes are the ask form and a run's follow-up, and nothing else
    paths = ["/ask", "/ask/20261207-1-ab/follow-up", "/", "/ask/x", "/spend", "/wave/x",
             "/ask/../follow-up", "/ask/x/follow-up/more"]
    assert [p for p in paths if View.accepts_post(ui.view, p)] == paths[:2]
    calls = post_handlers(sources["ask.py"])
    assert {"prepare", "start"} <= calls["ask"]
    assert {"follow_up", "start"} <= calls["follow_up"]
    assert "start" in post_handlers(sources["live.py"])["start"]  # app.start.start
    views = post_handlers(sources["views.py"])["post"]
    assert views & {"ask", "follow_up"} == {"ask", "follow_up"}
    # a follow-up box (the live page's, a recorded wave's) posts to that one route
    for page in ("running", "follow_box"):
        assert "follow_box" in calls[page] or "issue" in calls[page]
    assert {"refusal", "follow_box"} <= post_handlers(sources["views.py"])["wave"]
    assert run_starting_problems({"x.py": "from orchestrator.app.continuation import "
                                           "prepare_continue\n"})
    # and the follow-up is the app's prepare too: here, or inside the app's follow_up
    module = next(n.module for n in ast.walk(ast.parse(sources["ask.py"]))
                  if isinstance(n, ast.ImportFrom) and n.module
                  and "follow_up" in {a.name for a in n.names})
    inner = post_handlers((ROOT / (module.replace(".", "/") + ".py")).read_text())
    assert "prepare" in calls["follow_up"] or "prepare" in inner["follow_up"]


def test_streamed_text_reaches_the_live_page_as_text_events(ui):
    """A leg's ``LegText`` (type "text", the shared contract with streaming) is served to the
    live page in order, as JSON it writes with textContent; past the cap only text is shed."""
    from orchestrator.events import LegEnded, LegText
    from orchestrator.ui import live as live_mod

    run = live_mod.Live(run_id="r1", kind="wave", models=["m"], question="q")
    ui.view.ask.live.runs["r1"] = run
    run.add(LegText(leg_id="r1-1", text="<b>hel"))
    run.add(LegText(leg_id="r1-1", text="lo</b>"))
    resp = ui.request("GET", "/ask/r1/events.json?after=0", headers={"Cookie": ui.cookie})
    body = json.loads(resp.body)
    assert [(e["type"], e["text"]) for e in body["events"]] == [("text", "<b>hel"),
                                                                ("text", "lo</b>")]
    assert body["next"] == 2 and body["done"] is False
    again = json.loads(ui.request("GET", "/ask/r1/events.json?after=2",
                                  headers={"Cookie": ui.cookie}).body)
    assert again["events"] == []
    run.events.extend({"type": "text"} for _ in range(live_mod.KEPT))
    run.add(LegText(leg_id="r1-1", text="shed"))
    run.add(LegEnded({"leg_id": "r1-1", "status": "complete"}))
    assert run.events[-1]["type"] == "leg_ended" and run.events[-2] == {"type": "text"}
