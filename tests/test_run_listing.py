"""Status read from the record while a run runs: one run listing for `orch status`, `orch runs`
and `orch ui`.

A council and a deliberation run as real `orch` processes against the scripted server, which
holds one reply until the test releases it. While held, `orch status` (text and JSON), `orch
runs --json` and the UI (a real headless Chromium over `orch ui`'s view) must show the stages
or rounds finished so far, their legs, and the cost the ledger holds, request for request.
Then: every status the listing prints can be filtered on; the listing's summaries on disk
are stale when the code that made them changed (no hand-bumped version); and the faces list
runs through the one listing only."""

from __future__ import annotations

import ast
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from ledger_rows import ledger_rows
from test_council_run import judgement, kind_of, review_text
from test_deliberation import MODELS, NAMES, ROUND1, USAGE, block, quoted
from ui_browser import Chromium

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

ROOT = Path(__file__).resolve().parents[1]
ORCH = [sys.executable, "-m", "orchestrator"]
PRICES = {"input_cost_per_mtok": 1000.0, "output_cost_per_mtok": 2000.0}  # $0.001 a token in


def usage(n: int) -> dict[str, int]:
    """Distinct per answer, so a sum names the answers it holds."""
    return {"prompt_tokens": 1000 * n + 7, "completion_tokens": 10 * n}


def cost(n: int) -> float:
    """What ``usage(n)`` is billed at PRICES."""
    return ((1000 * n + 7) * PRICES["input_cost_per_mtok"]
            + 10 * n * PRICES["output_cost_per_mtok"]) / 1e6


def cli_json(*args: str):
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def cli_text(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def wait_for(check, what: str, proc: subprocess.Popen, timeout: float = 90.0):
    """``check()``'s first true answer; the run ending or the time passing first fails."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        if proc.poll() is not None:
            raise AssertionError(f"the run ended ({proc.returncode}) before {what}: "
                                 f"{proc.stderr.read()[-2000:]}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def money(value: float) -> str:
    return f"${value:,.4f}"


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chrome = Chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield chrome
    chrome.close()


class View:
    """`orch ui`'s web view over this ORCH_HOME, served in this process."""

    def __init__(self, home: Path) -> None:
        from orchestrator.ui.server import UIServer
        from orchestrator.ui.views import View as Router

        self.server = UIServer(Router(home / "runs", home / "bench", home / "cache"))
        self.server.start()
        self.base = f"http://127.0.0.1:{self.server.port}"
        self.cookie = f"orch_ui_{self.server.port}={self.server.token}"

    def url(self, path: str) -> str:
        return f"{self.base}{path}?token={self.server.token}"

    def get(self, path: str) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        conn.request("GET", path, headers={"Host": f"127.0.0.1:{self.server.port}",
                                           "Cookie": self.cookie})
        status = conn.getresponse().status
        conn.close()
        return status

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def runs_row(browser, view: View, run_id: str) -> list[str]:
    browser.open(view.url("/"))
    rows = browser.eval("""[...document.querySelectorAll('tr.run')].map(
        tr => [...tr.children].filter(c => !['question', 'models'].includes(c.className))
                              .map(c => c.textContent.trim()))""")
    return next(r for r in rows if r[0] == run_id)


def every_link_opens(browser, view: View) -> list[str]:
    """The page's links (but the nav's and the page's own), each answered 200."""
    hrefs = browser.eval("[...document.querySelectorAll('main a')].map(a => a.href)")
    for href in hrefs:
        path = href.removeprefix(view.base)
        assert view.get(path) == 200, href
    return hrefs


# -- a council, held in its review and in its judging ---------------------------------------

@pytest.mark.timeout(300)  # a real orch process and a browser, on a machine that may be busy
def test_a_running_council_shows_its_stages_legs_and_what_the_ledger_billed(
        orch, scripted_server, orch_home, tmp_path, browser):
    orch.provider(**PRICES)
    (tmp_path / "db.py").write_text("def build_query(x):\n    return 'select ' + x\n")
    (tmp_path / ".git").mkdir()  # the workspace the seats read
    review_held, judge_held = threading.Event(), threading.Event()

    def alpha(body, n):
        kind = kind_of(body)
        if kind == "review":
            return Reply(text=review_text("alpha"), usage=usage(1))
        return Reply(text=judgement(body["messages"][-1]["content"], "alpha"), usage=usage(3))

    def bravo(body, n):
        kind = kind_of(body)
        if kind == "review" and body["messages"][-1]["role"] == "user":  # reads a file first
            return Reply(tool_calls=[{"name": "read", "arguments": {"path": "db.py"}}],
                         usage=usage(2))
        if kind == "review":
            review_held.wait(120)
            return Reply(text=review_text("bravo"), usage=usage(4))
        judge_held.wait(120)
        return Reply(text=judgement(body["messages"][-1]["content"], "bravo"), usage=usage(5))

    scripted_server.script("alpha", alpha)
    scripted_server.script("bravo", bravo)
    scripted_server.script("delta", Reply(text="Fix it first.\n\nVERDICT: fix-first",
                                          usage=usage(6)))
    proc = subprocess.Popen([*ORCH, "council", "run", "-p", "Review the query layer.", "-m",
                             "scripted/alpha,scripted/bravo", "--chair", "scripted/delta",
                             "--json"], cwd=tmp_path, env=os.environ.copy(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    view = View(orch_home)
    try:
        run_dir = wait_for(lambda: next((orch_home / "runs").glob("council-*"), None),
                           "the council's folder", proc)
        run_id = run_dir.name.removeprefix("council-")
        billed = lambda: ledger_rows(orch_home, "run_id = ?", run_id)  # noqa: E731

        # held 1: alpha reviewed (cost(1)), bravo was billed its first step (cost(2): it read a
        # file) and waits on its second; its metadata.json need not say so yet
        wait_for(lambda: len(scripted_server.requests_for("bravo")) == 2
                 and sorted((r["model"], r["seq"]) for r in billed()) == [
                     ("scripted/alpha", 1), ("scripted/bravo", 1)]
                 and any(r["status"] == "complete" for r in billed()), "the review held", proc)
        paid = sum(r["cost_usd"] for r in billed())
        assert paid == pytest.approx(cost(1) + cost(2))
        doc = cli_json("status", run_id)
        assert (doc["status"], doc["exit_code"]) == ("running", None)
        assert doc["cost_usd"] == pytest.approx(paid)
        assert [(s["name"], s["status"], len(s["legs"])) for s in doc["stages"]] == [
            ("review", "running", 2)]
        assert doc["stages"][0]["cost_usd"] == pytest.approx(paid)
        assert [s["status"] for s in doc["seats"]] == ["reviewing", "reviewing"]
        assert [s["cost_usd"] for s in doc["seats"]] == pytest.approx([cost(1), cost(2)])
        assert doc["requests"] >= 1
        text = cli_text("status", run_id).splitlines()
        assert text[0] == f"Council {run_id}: running ({money(paid)} so far)"
        assert f"  stage review  running  2 legs  {money(paid)}" in text
        (listed,) = [r for r in cli_json("runs")["runs"] if r["id"] == run_id]
        assert (listed["kind"], listed["status"], listed["legs"]) == ("council", "running", 2)
        assert listed["cost_usd"] == pytest.approx(paid)
        assert [r["id"] for r in cli_json("runs", "--status", "running")["runs"]] == [run_id]

        assert runs_row(browser, view, run_id)[2:5] == ["running", "2", money(paid)]
        browser.open(view.url(f"/council/{run_id}/"))
        assert browser.eval("document.querySelector('#verdict .big').textContent") == \
            "Running: review"
        assert "No verdict" not in browser.eval("document.body.textContent")
        assert browser.eval("""[...document.querySelectorAll('tr.stage')].map(
            tr => [...tr.children].map(c => c.textContent))""") == [
            ["review", "running", "2", money(paid)]]
        assert "0 requests" not in browser.eval("document.getElementById('files')"
                                                 ".nextElementSibling.textContent")
        assert browser.eval("document.querySelectorAll('.card').length") == 2
        every_link_opens(browser, view)  # no link to a file the run has not written
        browser.screenshot(tmp_path / "council-running.png")

        # held 2: the reviews are a finished stage; alpha judged, bravo's judgement waits
        review_held.set()
        wait_for(lambda: any(kind_of(r.body) == "judge"
                             for r in scripted_server.requests_for("bravo"))
                 and len([r for r in billed() if r["status"] == "complete"]) == 3,
                 "the judging held", proc)
        paid = sum(r["cost_usd"] for r in billed())
        assert paid == pytest.approx(sum(cost(n) for n in (1, 2, 3, 4)))
        doc = cli_json("status", run_id)
        assert doc["status"] == "running" and doc["cost_usd"] == pytest.approx(paid)
        assert [(s["name"], s["status"]) for s in doc["stages"]] == [
            ("review", "complete"), ("judge", "running")]
        assert [s["status"] for s in doc["seats"]] == ["reviewed", "reviewed"]
        (listed,) = [r for r in cli_json("runs")["runs"] if r["id"] == run_id]
        assert listed["cost_usd"] == pytest.approx(paid)
        browser.open(view.url(f"/council/{run_id}/"))
        assert browser.eval("document.querySelector('#verdict .big').textContent") == \
            "Running: judge"
        assert browser.eval("""[...document.querySelectorAll('tr.stage')].map(
            tr => tr.children[1].textContent)""") == ["complete", "running"]
        hrefs = every_link_opens(browser, view)
        assert not [h for h in hrefs if "/reviews/" in h]  # written at the end: not yet
    finally:
        review_held.set()
        judge_held.set()
        out, err = proc.communicate(timeout=120)
        view.close()
    assert proc.returncode == 0, err
    final = json.loads(out)
    assert final["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in billed()))
    doc = cli_json("status", run_id)
    assert (doc["status"], doc["cost_usd"]) == ("complete", pytest.approx(final["cost_usd"]))


# -- a deliberation, held in round 2 --------------------------------------------------------

@pytest.mark.timeout(300)  # a real orch process and a browser, on a machine that may be busy
def test_a_deliberation_in_round_2_shows_its_rounds_legs_and_what_the_ledger_billed(
        orch, scripted_server, orch_home, tmp_path, browser):
    orch.provider(**PRICES)
    held = threading.Event()

    def leg(model: str):
        def reply(body, n):
            if n == 0:
                return Reply(text=ROUND1[model], usage=USAGE)
            if model == "qwen3-coder":
                held.wait(120)
            vote = sorted(quoted(body["messages"][-1]["content"]))[0]
            return Reply(text="Mine stands.\n" + block(decision="keep", vote=vote,
                                                        reason="clear"), usage=USAGE)
        return reply

    for model in MODELS:
        scripted_server.script(model, leg(model))
    proc = subprocess.Popen([*ORCH, "fanout", "-m", NAMES, "-p", "An LRU cache in Python?",
                             "--rounds", "3", "--tools", "none", "--json"],
                            env=os.environ.copy(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    view = View(orch_home)
    try:
        wave_json = wait_for(lambda: next((orch_home / "runs").glob("*/wave.json"), None),
                             "the deliberation's wave.json", proc)
        run_id = wave_json.parent.name
        billed = lambda: ledger_rows(orch_home, "wave_id like ?", f"{run_id}-%")  # noqa: E731
        # round 1 answered by all three, round 2 by two; the third's reply waits
        wait_for(lambda: scripted_server.count("qwen3-coder") == 2
                 and len([r for r in billed() if r["status"] == "complete"]) == 5,
                 "round 2 held", proc)
        paid = sum(r["cost_usd"] for r in billed())
        assert paid == pytest.approx(5 * (1.0 + 0.1))
        doc = cli_json("status", run_id)
        assert (doc["kind"], doc["status"]) == ("deliberation", "running")
        assert doc["cost_usd"] == pytest.approx(paid)
        assert [r["round"] for r in doc["rounds"]] == [1]  # decided so far
        assert [(w["status"], w["cost_usd"]) for w in doc["round_waves"]] == [
            ("complete", pytest.approx(3.3)), ("running", pytest.approx(2.2))]
        assert sorted(leg["status"] for leg in doc["legs"]) == ["complete"] * 5 + ["running"]
        text = cli_text("status", run_id).splitlines()
        assert text[0].startswith(f"Deliberation {run_id}: running, {money(paid)} so far")
        assert "  rounds decided: 1 of up to 3" in text
        (listed,) = [r for r in cli_json("runs")["runs"] if r["id"] == run_id]
        assert (listed["kind"], listed["status"], listed["legs"]) == (
            "deliberation", "running", 6)
        assert listed["cost_usd"] == pytest.approx(paid)

        assert runs_row(browser, view, run_id)[1:5] == [
            "deliberation", "running", "6", money(paid)]
        browser.open(view.url(f"/wave/{run_id}"))
        assert browser.eval("document.getElementById('wave').dataset.live") == "yes"
        assert browser.eval("document.getElementById('wave-cost').textContent") == money(paid)
        legs = browser.eval("""[...document.querySelectorAll('tr.leg')].map(
            tr => tr.querySelector('[data-field=status]').textContent)""")
        assert sorted(legs) == ["complete"] * 5 + ["running"]
        browser.open(view.url(f"/deliberation/{run_id}"))
        assert browser.eval("document.getElementById('rounds-decided').textContent") == "1"
        assert browser.eval("document.getElementById('run-cost').textContent") == money(paid)
        assert browser.eval("""[...document.querySelectorAll('tr.round-wave')].map(
            tr => tr.querySelector('[data-field=status]').textContent)""") == [
            "complete", "running"]
        assert browser.eval("document.querySelectorAll('section.round').length") == 1
        every_link_opens(browser, view)
        browser.screenshot(tmp_path / "deliberation-running.png")
    finally:
        held.set()
        out, err = proc.communicate(timeout=120)
        view.close()
    assert proc.returncode == 0, err
    final = json.loads(out)
    assert final["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in billed()))
    assert cli_json("status", run_id)["status"] == "complete"


# -- a live wave: the ledger ahead of the files ----------------------------------------------

def test_a_live_wave_shows_what_the_ledger_billed_before_its_files_say_so(orch_home):
    """A leg's metadata.json is written at changes of state; its ledger row right after each
    billed answer. While the wave's process runs, `orch status` and `orch runs` show the
    ledger's (and the outbox's, read, not replayed) cost, the legs still running, and
    write nothing."""
    from orchestrator.engine.record import LegRecord
    from orchestrator.ledger import outbox
    from orchestrator.ledger.connection import default_url
    from orchestrator.ledger.spend import Ledger
    from orchestrator.pids import process_started
    from orchestrator.request import Usage

    wave_id = "20261207-101500-0123456789abcdef"
    runs = orch_home / "runs"
    legs = [LegRecord(leg_id=f"{wave_id}-{n}", wave_id=wave_id, model=f"scripted/m{n}",
                      provider="scripted", status="running") for n in (1, 2)]
    (runs / wave_id).mkdir(parents=True)
    (runs / wave_id / "wave.json").write_text(json.dumps({
        "wave_id": wave_id, "status": "running", "exit_code": None, "cost_usd": 0,
        "legs": [leg.to_dict() for leg in legs], "pid": os.getpid(),
        "pid_started": process_started(os.getpid()), "created_at": "2026-12-07T10:15:00+00:00"}))
    for leg in legs:
        (runs / leg.leg_id).mkdir()
        (runs / leg.leg_id / "metadata.json").write_text(json.dumps(leg.to_dict()))
    files = {p: p.read_bytes() for p in runs.rglob("*.json")}
    for leg, cost_usd, billed in ((legs[0], 0.5, 2), (legs[1], 0.25, 1)):
        leg.usage, leg.cost_usd, leg.cost_source, leg.billed = \
            Usage(100 * billed, 10), cost_usd, "reported", billed
    Ledger(default_url()).append(legs[0].ledger_row(tag=None, project_dir=None,
                                                    in_flight=True))
    outbox.append(default_url(), legs[1].ledger_row(tag=None, project_dir=None,
                                                    in_flight=True))  # the ledger was busy

    doc = cli_json("status", wave_id)
    assert (doc["status"], doc["cost_usd"]) == ("running", pytest.approx(0.75))
    assert [(leg["status"], leg["cost_usd"], leg["billed"]) for leg in doc["legs"]] == [
        ("running", 0.5, 2), ("running", 0.25, 1)]
    (listed,) = cli_json("runs")["runs"]
    assert (listed["status"], listed["cost_usd"]) == ("running", pytest.approx(0.75))
    assert cli_text("status", wave_id).splitlines()[0].startswith(
        f"Wave {wave_id}: running, $0.7500 so far")
    assert {p: p.read_bytes() for p in runs.rglob("*.json")} == files  # nothing written
    assert len(outbox.journaled(default_url())) == 1  # read, not replayed
    assert len(Ledger(default_url(), replay=False).rows()) == 1


# -- every status printed can be filtered on ------------------------------------------------

def _strings(node: ast.AST) -> set[str]:
    """The string constants an expression may give (``"a" if x else "b"``: both)."""
    if isinstance(node, ast.IfExp):
        return _strings(node.body) | _strings(node.orelse)
    return {node.value} if isinstance(node, ast.Constant) and isinstance(node.value, str) \
        else set()


def _literal_statuses() -> set[str]:
    """Every run status orch writes, read from the code that writes it: a council's
    ``self.status`` (council/run.py), the statuses ``build_document`` is given (engine/,
    deliberation/), ``wave_status``'s answers, the listing's own (a bench's, a dead run's)."""
    found: set[str] = set()
    files = [*ROOT.glob("orchestrator/council/*.py"), *ROOT.glob("orchestrator/engine/*.py"),
             *ROOT.glob("orchestrator/deliberation/*.py"),
             *ROOT.glob("orchestrator/operations/*.py")]
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):  # self.status = "x" / self.status, e = "x", ...
                for target in node.targets:
                    names = target.elts if isinstance(target, ast.Tuple) else [target]
                    values = node.value.elts if isinstance(node.value, ast.Tuple) else \
                        [node.value]
                    for name, value in zip(names, values, strict=False):
                        if isinstance(name, ast.Attribute) and name.attr == "status" and \
                                isinstance(name.value, ast.Name) and name.value.id == "self" \
                                and path.name == "run.py" and path.parent.name == "council" \
                                and isinstance(value, (ast.Constant, ast.IfExp)):
                            found |= _strings(value)
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in (
                    "build_document", "RunEntry"):
                for kw in node.keywords:
                    if kw.arg == "status" and isinstance(kw.value, ast.Constant):
                        found.add(kw.value.value)
                if getattr(node.func, "id", None) == "RunEntry" and len(node.args) > 2:
                    for arg in ast.walk(node.args[2]):
                        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                            found.add(arg.value)
            if isinstance(node, ast.FunctionDef) and node.name in ("wave_status", "current"):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Return) and isinstance(sub.value, ast.Constant):
                        found.add(sub.value.value)
                    if isinstance(sub, ast.Dict):
                        for k, v in zip(sub.keys, sub.values, strict=True):
                            if isinstance(k, ast.Constant) and k.value == "status" and \
                                    isinstance(v, ast.Constant):
                                found.add(v.value)
    return found


def test_every_status_orch_writes_is_one_the_listing_prints_and_filters_on(orch_home):
    from orchestrator.app.runs import STATUSES
    from orchestrator.engine.wave_document import wave_status

    written = _literal_statuses()
    assert {"degraded", "quorum", "interrupted", "aborted", "partial"} <= written, written
    assert written <= set(STATUSES), written - set(STATUSES)
    from orchestrator.engine.record import LegRecord

    for legs in (["complete"], ["complete", "error"], ["aborted"], ["error"], ["refused"],
                 ["running", "complete"], ["pending"], []):
        records = [LegRecord(leg_id=f"w-{i}", wave_id="w", model="m", provider="p", status=s)
                   for i, s in enumerate(legs)]
        assert wave_status(records) in STATUSES
    for status in STATUSES:  # each is accepted, in `orch runs` and in the UI's filter
        result = CliRunner().invoke(cli, ["runs", "--status", status, "--json"])
        assert result.exit_code == 0, (status, result.output)
    from orchestrator.ui.views import View as Router

    page = Router(orch_home / "runs")("/", {}).body.decode()
    assert re.findall(r'<option value="([a-z]+)"', page)[:len(STATUSES)] == list(STATUSES)


def test_a_degraded_council_is_listed_and_found_by_its_status_and_an_unknown_one_is_unreadable(
        orch_home):
    from orchestrator.pids import process_started

    runs = orch_home / "runs"
    for run_id, status in (("c1", "degraded"), ("c2", "quorum"), ("c3", "finished-ish")):
        (runs / f"council-{run_id}").mkdir(parents=True)
        (runs / f"council-{run_id}" / "run.json").write_text(json.dumps({
            "run_id": run_id, "kind": "council", "status": status, "exit_code": 2,
            "cost_usd": 0.5, "seats": [{}, {}], "pid": os.getpid(),
            "pid_started": process_started(os.getpid())}))
    listed = {r["id"]: r["status"] for r in cli_json("runs")["runs"]}
    assert listed == {"c1": "degraded", "c2": "quorum", "c3": "unreadable"}
    for status in set(listed.values()):
        found = [r["id"] for r in cli_json("runs", "--status", status)["runs"]]
        assert found == [k for k, v in listed.items() if v == status]


# -- the summaries on disk follow the code that made them -----------------------------------

def test_the_summaries_on_disk_are_not_read_by_other_code(orch_home, monkeypatch):
    from orchestrator.operations import run_index

    wave = orch_home / "runs" / "20261207-101500-ab12"
    wave.mkdir(parents=True)
    (wave / "wave.json").write_text(json.dumps({
        "wave_id": wave.name, "status": "complete", "exit_code": 0, "legs": [{}],
        "cost_usd": 0.25, "created_at": "2026-12-07T10:15:00+00:00"}))
    first = run_index.RunIndex(orch_home / "runs", None, orch_home / "cache")
    first.entries()
    first.flush()
    assert first.read == 1
    (cache,) = (orch_home / "cache").glob("runs-*.json")
    assert json.loads(cache.read_text())["version"] == run_index.code_version()
    again = run_index.RunIndex(orch_home / "runs", None, orch_home / "cache")
    again.entries()
    assert again.read == 0  # the same code: every summary from disk
    # the code that makes the summaries changed (an edit, an upgrade): its digest changes
    source = orch_home / "run_summary_edited.py"
    source.write_text(Path(run_index.run_summary.__file__).read_text() + "\n# edited\n")
    monkeypatch.setattr(run_index.run_summary, "__file__", str(source))
    run_index.code_version.cache_clear()
    try:
        edited = run_index.RunIndex(orch_home / "runs", None, orch_home / "cache")
        edited.entries()
        assert edited.read == 1  # read again, not taken from a file another code wrote
    finally:
        monkeypatch.undo()
        run_index.code_version.cache_clear()


# -- one listing ------------------------------------------------------------------------------

FACES = ("cli", "ui", "mcp_server", "daemon", "app")
LISTING_CALLS = {"glob", "rglob", "iterdir", "scandir", "listdir", "walk"}
# the one face call that looks at the runs folder without listing runs: a free bench id
ALLOWED = {("orchestrator/app/bench_run.py", "glob")}  # the bench pipeline left cli/ for app/


def face_listings(root: Path = ROOT) -> set[tuple[str, str]]:
    """(file, call) for every folder listing in a face's code."""
    found = set()
    for face in FACES:
        for path in (root / "orchestrator" / face).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and node.func.attr in LISTING_CALLS:
                    found.add((str(path.relative_to(root)), node.func.attr))
    return found


def test_the_faces_list_runs_through_the_one_listing_only(tmp_path):
    assert face_listings() <= ALLOWED, face_listings() - ALLOWED
    # the check sees a face that lists the runs folder itself
    fake = tmp_path / "orchestrator" / "ui"
    fake.mkdir(parents=True)
    (fake / "own.py").write_text("def rows(runs):\n    return list(runs.glob('*/wave.json'))\n")
    for face in FACES:
        (tmp_path / "orchestrator" / face).mkdir(parents=True, exist_ok=True)
    assert face_listings(tmp_path) == {("orchestrator/ui/own.py", "glob")}
    # and the listing is made in one place: RunIndex, built by operations/runs.py and the UI
    makers = set()
    for path in (ROOT / "orchestrator").rglob("*.py"):
        if "RunIndex(" in path.read_text(encoding="utf-8"):
            makers.add(str(path.relative_to(ROOT)))
    assert makers == {"orchestrator/operations/runs.py", "orchestrator/ui/views.py"}
