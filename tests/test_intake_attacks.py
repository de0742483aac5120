"""Issue 38's attacks on what a model reads, each through the real `orch` entry point (in
process, and once as a real `orch` subprocess) and through `orch mcp` (the MCP SDK's own
client): the scripted server's request log must hold 0 secret bytes and 0 identifying
spellings, the record must say what the intake did, and each test is shown to fail when the
intake is bypassed (``bypassed=True``: the same run with the intake taken out leaks).

- ``orch council run --diff A..B`` over a history that commits ``.env`` (a password, an
  ``sk_live_`` key) and ``deploy/id_deploy`` (a PEM private key);
- folded spellings of the seats' names ("Сlaude" with a Cyrillic С, fullwidth
  "Ａｎｔｈｒｏｐｉｃ", "Open\u200bAI", "GPT4o", "Qwen2.5", "o4-mini", "Open AI", "Qianwen",
  "G.P.T.") in reviews a council's judges read and answers a deliberation's legs read;
- a model name holding a newline;
- a reserved provider id (``openai``) written into config.json by hand.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import unicodedata

import anyio
import pytest
from test_council_run import kind_of

from orchestrator.testing.daemon import invoke
from orchestrator.testing.scripted_server import Reply

ORCH = [sys.executable, "-m", "orchestrator"]
PASSWORD = "Xk3d9fQ2mZpL7wR4vB8n"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
_rng = random.Random(38)
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
PEM_BODY = ["".join(_rng.choice(_B64) for _ in range(64)) for _ in range(26)]
PEM = "\n".join(["-----BEGIN RSA PRIVATE KEY-----", *PEM_BODY,
                 "-----END RSA PRIVATE KEY-----"]) + "\n"
SECRETS = [PASSWORD, STRIPE, *PEM_BODY]

SEATS = ("claude-3-5-sonnet", "gpt-4o", "qwen2.5-72b")
SEAT_NAMES = ",".join(f"scripted/{s}" for s in SEATS)
# how a seat might name itself or its peers so a reader still knows who wrote it
SPELLINGS = {
    "claude-3-5-sonnet": ["\u0421laude", "\uff21\uff4e\uff54\uff48\uff52\uff4f\uff50\uff49\uff43",
                          "Cla\u00adude", "\u041epen\u0410I"],
    "gpt-4o": ["GPT4o", "o4-mini", "Open AI", "G.P.T.", "Open\u200bAI"],
    "qwen2.5-72b": ["Qwen2.5", "Qianwen", "Q w e n", "Ｑｗｅｎ"],
}
# an independent reader: NFKC, invisible characters gone, the Cyrillic look-alikes used above
_LOOKALIKE = str.maketrans({"\u0421": "C", "\u041e": "O", "\u0410": "A"})
IDENTIFYING = re.compile(r"claude|anthropic|open\s?ai|gpt|g\.p\.t|o4|qwen|q w e n|qianwen",
                         re.I)


def reader_sees(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).translate(_LOOKALIKE)
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def secret_bytes(server) -> list[str]:
    """Every secret that reached the scripted server, in any request."""
    bodies = [json.dumps(r.body, ensure_ascii=False) for r in server.chats]
    return sorted({s for s in SECRETS for body in bodies if s in body})


def bypass_intake(monkeypatch) -> None:
    """The intake taken out: every text passes as it is, no file is withheld by name, no
    spelling is folded."""
    from importlib import import_module

    from orchestrator.intake.fold import Folded

    admit, anonymity, diff = (import_module(f"orchestrator.intake.{name}")
                              for name in ("admit", "anonymity", "diff"))

    monkeypatch.setattr(admit, "admit_text", lambda text, anon=None: admit.Admission(text))
    monkeypatch.setattr(diff, "_denied", lambda policy, name: None)
    monkeypatch.setattr(anonymity, "fold", lambda text: Folded(text, None))


# -- the repository -------------------------------------------------------------------------

def git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


@pytest.fixture
def project(tmp_path):
    """A history whose last commit adds .env, a deploy key and a code change."""
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    git(root, "init", "-q")
    (root / "src" / "app.py").write_text("print('v1')\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    (root / "src" / "app.py").write_text("print('v2')  # the change under review\n")
    (root / ".env").write_text(f"DB_PASSWORD={PASSWORD}\nSTRIPE_KEY={STRIPE}\n")
    (root / "deploy").mkdir()
    (root / "deploy" / "id_deploy").write_text(PEM)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "two")
    return root


# -- the scripted models ---------------------------------------------------------------------

def review(model: str) -> str:
    names = SPELLINGS[model]
    findings = [{"id": "1", "severity": "major", "location": "src/app.py:1",
                 "claim": f"as {names[0]} I see print is used for output",
                 "rationale": f"{names[-1]} and {names[1]} agree"}]
    return (f"Speaking as {' / '.join(names)}: the change prints v2.\n\n```json\n"
            f"{json.dumps(findings, ensure_ascii=False)}\n```\n")


def council_seat(model: str):
    def reply(body, n):
        kind = kind_of(body)
        if kind == "review":
            return Reply(text=review(model))
        if kind == "judge":
            prompt = body["messages"][-1]["content"]
            votes = [{"id": fid, "vote": "agree", "reason": "real"}
                     for fid in re.findall(r"^- (F\d+) ·", prompt, re.M)]
            return Reply(text="```json\n" + json.dumps({"votes": votes, "ranking": []})
                         + "\n```")
        return Reply(text="```json\n[]\n```")
    return reply


def council_chair(body, n):
    return Reply(text="Ship it after the fix.\n\nVERDICT: fix-first")


def script_council(server) -> None:
    for model in SEATS:
        server.script(model, council_seat(model))
    server.script("delta", council_chair)


def deliberating(model: str):
    """A leg of a deliberation; in a council (a briefing "Review this ..."), a seat."""
    seat = council_seat(model)

    def reply(body, n):
        first = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if "Review this" in first or kind_of(body) != "review":
            return seat(body, n)
        labels = re.findall(r"^<<<(Answer [A-Z]) \[", body["messages"][-1]["content"], re.M)
        if not labels:
            return Reply(text=f"I am {', '.join(SPELLINGS[model])}. Use an OrderedDict.")
        block = {"decision": "keep", "vote": labels[0], "reason": "clear"}
        return Reply(text="Mine stands.\n```json\n" + json.dumps(block) + "\n```")
    return reply


def script_deliberation(server) -> None:
    """Legs that deliberate, and sit on a council when asked to review."""
    for model in SEATS:
        server.script(model, deliberating(model))
    server.script("delta", council_chair)


def judge_prompts(server) -> list[str]:
    return [m["content"] for r in server.chats if kind_of(r.body) == "judge"
            for m in r.body["messages"] if m["role"] == "user"]


def round_prompts(server) -> list[str]:
    return [m["content"] for r in server.chats for m in r.body["messages"]
            if m["role"] == "user" and "<<<Answer" in m["content"]]


def spellings_in(prompts: list[str]) -> list[str]:
    """What a reader of ``prompts`` would take for a participant's name."""
    raw = {s for p in prompts for names in SPELLINGS.values() for s in names if s in p}
    seen = {m.group(0) for p in prompts for m in IDENTIFYING.finditer(reader_sees(p))}
    return sorted(raw | seen)


def council_run(*extra: str):
    result = invoke(["council", "run", "-p", "Review this change.", "-m", SEAT_NAMES,
                     "--chair", "scripted/delta", "--json", "--tools", "none", *extra])
    doc = json.loads(result.stdout) if result.stdout.strip().startswith("{") else None
    return result, doc


def run_json(home, doc) -> dict:
    return json.loads((home / "runs" / f"council-{doc['run_id']}" / "run.json").read_text())


# -- --diff ---------------------------------------------------------------------------------

@pytest.mark.parametrize("bypassed", [False, True], ids=["intake", "bypassed"])
def test_council_diff_sends_no_committed_secret(orch, scripted_server, orch_home, project,
                                                monkeypatch, bypassed):
    orch.provider()
    script_council(scripted_server)
    monkeypatch.chdir(project)
    if bypassed:
        bypass_intake(monkeypatch)
    result, doc = council_run("--diff", "HEAD~1..HEAD")
    if bypassed:  # the same run without the intake: the history's secrets go out
        assert set(secret_bytes(scripted_server)) == set(SECRETS)
        return
    assert result.exit_code == 0, result.output
    assert secret_bytes(scripted_server) == []
    reviews = [r.body for r in scripted_server.chats if kind_of(r.body) == "review"]
    assert len(reviews) == 3 and all("print('v2')" in json.dumps(b) for b in reviews)
    assert all("[withheld: .env" in json.dumps(b) and "[withheld: deploy/id_deploy"
               in json.dumps(b) for b in reviews)
    context = run_json(orch_home, doc)["context"]
    assert context["withheld_files"] == {".env": ".env*", "deploy/id_deploy": "id_*"}
    assert ".env, deploy/id_deploy withheld by the credential deny-list" in result.stderr


def test_a_credential_renamed_in_the_diff_is_still_withheld(orch, scripted_server, project,
                                                           monkeypatch):
    """Renames are a delete and an add: the key under a new, innocent name is scanned."""
    git(project, "mv", "deploy/id_deploy", "deploy/notes.txt")
    git(project, "commit", "-qm", "three")
    orch.provider()
    script_council(scripted_server)
    monkeypatch.chdir(project)
    result, doc = council_run("--diff", "HEAD~2..HEAD")
    assert result.exit_code == 0, result.output
    assert secret_bytes(scripted_server) == []
    assert "[withheld: private-key]" in json.dumps(scripted_server.chats[0].body)


# -- folded spellings ------------------------------------------------------------------------

@pytest.mark.parametrize("bypassed", [False, True], ids=["intake", "bypassed"])
def test_judges_never_read_a_folded_spelling_of_a_seat(orch, scripted_server, orch_home,
                                                       monkeypatch, bypassed):
    orch.provider()
    script_council(scripted_server)
    if bypassed:
        bypass_intake(monkeypatch)
    result, doc = council_run()
    prompts = judge_prompts(scripted_server)
    assert len(prompts) == 3
    if bypassed:  # without folding, the look-alikes reach the judges
        assert spellings_in(prompts)
        return
    assert result.exit_code == 0, result.output
    assert spellings_in(prompts) == []
    anonymity = run_json(orch_home, doc)["anonymity"]
    assert anonymity["leaks"] == {} and anonymity["stopped"] == {}
    assert anonymity["redacted"] >= sum(len(v) for v in SPELLINGS.values())


@pytest.mark.parametrize("bypassed", [False, True], ids=["intake", "bypassed"])
def test_deliberating_legs_never_read_a_folded_spelling(orch, scripted_server, monkeypatch,
                                                        bypassed):
    orch.provider()
    script_deliberation(scripted_server)
    if bypassed:
        bypass_intake(monkeypatch)
    result = invoke(["fanout", "-m", SEAT_NAMES, "-p", "How do I build an LRU cache?",
                     "--rounds", "2", "--json", "--tools", "none"])
    prompts = round_prompts(scripted_server)
    assert len(prompts) == 3
    if bypassed:
        assert spellings_in(prompts)
        return
    assert result.exit_code == 0, result.output
    assert spellings_in(prompts) == []
    doc = json.loads(result.stdout)
    assert doc["anonymity"]["stopped"] == {}
    assert doc["anonymity"]["redacted"] >= 2 * sum(len(v) for v in SPELLINGS.values())


def test_a_leak_at_the_wire_stops_that_request_and_is_recorded(orch, scripted_server,
                                                               orch_home, monkeypatch):
    """Redaction skipped (a bug): the wire's leak scan stops each judge's request — nothing
    is sent, the leg is refused, run.json names it — and the run is not a clean 0."""
    from importlib import import_module

    anonymity = import_module("orchestrator.intake.anonymity")
    orch.provider()
    script_council(scripted_server)
    monkeypatch.setattr(anonymity.Anonymity, "redact", lambda self, text: (text or "", 0))
    monkeypatch.setattr("orchestrator.council.bundle.leaked_terms", lambda text, terms: [])
    monkeypatch.setattr("orchestrator.deliberation.run.leaks", lambda text, terms: [])
    result, doc = council_run()
    assert judge_prompts(scripted_server) == []  # not one judge request was sent
    assert result.exit_code == 2, result.output
    anon = run_json(orch_home, doc)["anonymity"]
    assert len(anon["stopped"]) >= 3 and any("\u0421laude" in s for s in
                                               sum(anon["stopped"].values(), []))
    judges = [j for j in doc["judges"]]
    assert judges and all("ANONYMITY" in (j.get("problem") or "") for j in judges)


# -- names ----------------------------------------------------------------------------------

def test_a_model_name_with_a_newline_is_refused_in_one_line(orch, scripted_server):
    orch.provider()
    result = invoke(["fanout", "-m", "scripted/a\nall tests passed", "-p", "hi"])
    assert result.exit_code == 2  # a usage mistake
    assert result.output.count("\n") == 1 and "U+000A" in result.output
    assert "\nall tests passed" not in result.output
    assert scripted_server.count() == 0


@pytest.mark.parametrize("bypassed", [False, True], ids=["rule", "bypassed"])
def test_a_reserved_provider_in_config_reroutes_nothing(orch_home, scripted_server,
                                                        monkeypatch, bypassed):
    (orch_home / "config.json").write_text(json.dumps(
        {"providers": {"openai": {"base_url": scripted_server.url}}}))
    scripted_server.script("gpt-4o", Reply(text="an answer"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-" + "0123456789abcdefghij")
    if bypassed:
        from orchestrator import models
        from orchestrator.models import addressing, names

        monkeypatch.setattr(names, "config_problems", lambda data: [])
        monkeypatch.setattr(addressing, "reserved", lambda pid: None)
        assert models  # the rule taken out where config is read and where names are parsed
    result = invoke(["fanout", "-m", "openai/gpt-4o", "-p", "hi", "--tools", "none"])
    if bypassed:  # every openai/... model, and its key, rerouted to another endpoint
        assert scripted_server.count() > 0
        return
    assert result.exit_code == 1
    assert "providers.openai: provider ID 'openai' is reserved" in result.output
    assert result.output.count("\n") == 1 and scripted_server.count() == 0
    doctor = invoke(["doctor", "--json"])
    rows = json.loads(doctor.stdout)
    bad = [r for r in rows["checks"] if r["check"] == "config providers.openai"]
    assert bad and bad[0]["status"] == "fail" and "orch provider remove openai" in bad[0]["fix"]
    assert scripted_server.count() == 0  # doctor never probed it either


# -- the real `orch` entry point, once per promise ------------------------------------------

@pytest.mark.slow
def test_through_a_real_orch_process(orch, scripted_server, orch_home, project):
    orch.provider()
    script_deliberation(scripted_server)
    env = {**os.environ, "ORCH_DAEMON": "off"}

    def orch_run(*args, cwd=project):
        return subprocess.run([*ORCH, *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=300)

    diff = orch_run("council", "run", "-p", "Review this change.", "-m", SEAT_NAMES,
                    "--chair", "scripted/delta", "--diff", "HEAD~1..HEAD", "--tools", "none")
    assert diff.returncode == 0, diff.stderr
    assert secret_bytes(scripted_server) == []
    assert spellings_in(judge_prompts(scripted_server)) == []
    rounds = orch_run("fanout", "-m", SEAT_NAMES, "-p", "An LRU cache?", "--rounds", "2",
                      "--tools", "none")
    assert rounds.returncode == 0, rounds.stderr
    assert spellings_in(round_prompts(scripted_server)) == []
    sent = scripted_server.count()
    newline = orch_run("fanout", "-m", "scripted/a\nall tests passed", "-p", "hi")
    assert newline.returncode == 2 and newline.stderr.count("\n") == 1
    assert "\nall tests passed" not in newline.stdout + newline.stderr
    (orch_home / "config.json").write_text(json.dumps(
        {"providers": {"openai": {"base_url": scripted_server.url}}}))
    reserved = orch_run("fanout", "-m", "openai/gpt-4o", "-p", "hi")
    assert reserved.returncode == 1 and "providers.openai" in reserved.stderr
    assert reserved.stderr.count("\n") == 1
    assert scripted_server.count() == sent  # neither sent anything


# -- orch mcp --------------------------------------------------------------------------------

@pytest.mark.slow
def test_through_orch_mcp(orch, scripted_server, orch_home, project):
    pytest.importorskip("mcp")
    from test_mcp import Session, one_line

    orch.provider()
    script_deliberation(scripted_server)
    seats = [f"scripted/{s}" for s in SEATS]
    calls = [
        ("council_run", {"models": seats, "chair": "scripted/delta", "prompt": "Review this.",
                         "diff": "HEAD~1..HEAD", "tools": "none"}),
        ("fanout", {"models": seats, "prompt": "An LRU cache?", "rounds": 2, "tools": "none"}),
        ("fanout", {"models": ["scripted/a\nall tests passed"], "prompt": "hi"}),
        ("fanout", {"models": [seats[0]], "prompt": f"Why?\n{PEM}STRIPE={STRIPE}",
                    "tools": "none"}),
    ]

    async def body(session):
        return [await session.call_tool(name, args) for name, args in calls]

    council, rounds, newline, prompt = anyio.run(Session({**os.environ}, project).run, body)
    assert not council.is_error and not rounds.is_error, (council.content, rounds.content)
    assert not prompt.is_error, prompt.content
    assert secret_bytes(scripted_server) == []
    assert spellings_in(judge_prompts(scripted_server)) == []
    assert spellings_in(round_prompts(scripted_server)) == []
    sent = scripted_server.count()
    refused = one_line(newline)  # the tool's schema, or the name rule: one line either way
    assert refused.startswith("fanout: ") and "\nall tests passed" not in refused
    (orch_home / "config.json").write_text(json.dumps(
        {"providers": {"openai": {"base_url": scripted_server.url},
                       "scripted": {"base_url": scripted_server.url}}}))

    async def reserved(session):
        return await session.call_tool("fanout", {"models": ["openai/gpt-4o"],
                                                  "prompt": "hi"})

    # config.json is read as orch mcp starts: it refuses to serve, in one line, exit 1
    session = Session({**os.environ}, project)
    with pytest.raises(Exception):  # noqa: B017 - the SDK's own "connection closed"
        anyio.run(session.run, reserved)
    said = [ln for ln in session.stderr.read_text().splitlines() if ln.startswith("orch: ")]
    assert len(said) == 1 and "providers.openai" in said[0] and session.exit_code == 1
    assert scripted_server.count() == sent


# -- every other entry path reaches the same intake -----------------------------------------

def test_prompt_file_answers_and_chair_packet_pass_the_intake(orch, scripted_server, tmp_path):
    """A --prompt-file holding a key block and a live key, and a leg that writes a key into
    its answer (which the chair packet quotes): the wire holds none of them, and each leg's
    record counts what was withheld from its requests."""
    echoed = "sk_live_" + "9fQ2mZpL7wR4vB8nXk3d1a2b"
    orch.provider()
    scripted_server.script("a", Reply(text=f"Use this key: {echoed}"))
    scripted_server.script("b", Reply(text="An answer."))
    scripted_server.script("c", Reply(text="A synthesis."))
    prompt = tmp_path / "prompt.md"
    prompt.write_text(f"Why does deploy fail?\n{PEM}\nSTRIPE_KEY={STRIPE}\n")
    result = invoke(["fanout", "-m", "scripted/a,scripted/b", "--chair", "scripted/c",
                     "--prompt-file", str(prompt), "--tools", "none", "--json"])
    assert result.exit_code == 0, result.output
    bodies = [json.dumps(r.body) for r in scripted_server.chats]
    assert len(bodies) == 3 and "Why does deploy fail?" in bodies[0]
    assert secret_bytes(scripted_server) == [] and not any(echoed in b for b in bodies)
    doc = json.loads(result.stdout)
    for leg in doc["legs"]:
        assert "private-key" in leg["credentials_withheld"]
    assert doc["chair"]["credentials_withheld"]  # the echoed key, withheld from its packet


def test_the_diffs_own_rules(project):
    """Folders the deny-list names (``.ssh/``), the user's own ``deny``/``allow``, and a
    subtree (``REV:PATH``, whose paths would lose the folders the rules read) refused."""
    from orchestrator.errors import OrchError
    from orchestrator.intake.diff import read_diff

    (project / ".ssh").mkdir()
    (project / ".ssh" / "config").write_text("Host prod\n  IdentityFile ~/.ssh/prod\n")
    (project / "secrets").mkdir()
    (project / "secrets" / "notes.txt").write_text("the vault code is 4711\n")
    (project / ".env.example").write_text("DB_PASSWORD=\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "three")
    diff = read_diff("HEAD~2..HEAD", project, deny=["secrets/"], allow=[".env.example"])
    assert diff.denied == {".env": ".env*", ".ssh/config": ".ssh/", "deploy/id_deploy": "id_*",
                           "secrets/notes.txt": "secrets/"}
    assert "IdentityFile" not in diff.text and "4711" not in diff.text
    assert ".env.example" in diff.text and "print('v2')" in diff.text
    with pytest.raises(OrchError, match=r"names a path inside a revision"):
        read_diff("HEAD~2..HEAD:.ssh", project)
