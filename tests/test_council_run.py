"""`orch council run` end to end: the real CLI, real HTTP to scripted seats through litellm,
the real SQLite ledger. Scripted seats answer the review, repair, judging and chair prompts
differently by reading the last user message of each request, as a real model would."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from orchestrator.testing.daemon import invoke
from orchestrator.testing.scripted_server import Reply

SEATS = "scripted/alpha,scripted/bravo,scripted/charlie"

# prose fingerprints (no model names in them, so judges can be scripted by content)
PROSE = {
    "alpha": "The query layer worries me. Speaking as alpha (scripted/alpha), I read db.py.",
    "bravo": "Mostly fine, but the query builder is unsafe.",
    "charlie": "Concurrency is the weak spot here.",
}
FINDINGS = {
    "alpha": [{"id": "1", "severity": "blocker", "location": "db.py:10",
               "claim": "SQL injection: build_query concatenates user input",
               "rationale": "user text reaches the SQL string"},
              {"id": "2", "severity": "minor", "location": "util.py:3",
               "claim": "helper lacks a docstring", "rationale": "hard to reuse"}],
    "bravo": [{"id": "b1", "severity": "major", "location": "db.py:10",
               "claim": "build_query concatenates user input into SQL: injection",
               "rationale": "use parameters"},
              {"id": "b2", "severity": "nit", "location": "calc.py:7",
               "claim": "variable name x is unclear", "rationale": "naming"}],
    "charlie": [{"id": "c1", "severity": "major", "location": "cache.py:20",
                 "claim": "race condition when the cache refreshes",
                 "rationale": "two writers, no lock"}],
}
# judge -> {claim keyword: vote}; ranking by whose prose, best first
VOTES = {
    "alpha": {"injection": "agree", "variable name": "dispute", "race condition": "agree"},
    "bravo": {"injection": "agree", "docstring": "neutral", "race condition": "dispute"},
    "charlie": {"injection": "agree", "docstring": "neutral", "variable name": "dispute"},
}
RANKING = {"alpha": ["bravo", "charlie"], "bravo": ["alpha", "charlie"],
           "charlie": ["alpha", "bravo"]}
SYNTHESIS = "Fix the SQL injection in build_query before shipping.\n\nVERDICT: fix-first"


def review_text(seat: str, block: str | None = None) -> str:
    block = json.dumps(FINDINGS[seat], indent=1) if block is None else block
    return f"{PROSE[seat]}\n\n```json\n{block}\n```\n"


def first_user(body: dict) -> str:
    """The stage's briefing: the leg's first user message (later ones may be tool results)."""
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def kind_of(body: dict) -> str:
    last = first_user(body)
    if last.startswith("You are judging"):
        return "judge"
    if "Its findings block could not be read" in last:
        return "repair"
    if last.startswith("You are the chair"):
        return "chair"
    if "does not end with a verdict line" in last:
        return "verdict-repair"
    return "review"


def judgement(prompt: str, seat: str, votes_by=None, prose_by=None, ranking_by=None) -> str:
    """Vote by claim keyword and rank by prose fingerprint, from what the prompt shows
    (the bench's VOTES, PROSE and RANKING unless others are given)."""
    votes_by, prose_by = votes_by or VOTES, prose_by or PROSE
    ranking_by = ranking_by or RANKING
    votes = []
    for fid, claim in re.findall(r"^- (F\d+) · [a-z]+(?: · [^—\n]+)? — (.+)$", prompt, re.M):
        for keyword, vote in votes_by[seat].items():
            if keyword in claim:
                votes.append({"id": fid, "vote": vote, "reason": f"{vote}: {keyword}"})
    labels = {}
    for label, body in re.findall(r"^### (Review [A-Z]) \[\w+\]\n(.*?)(?=^### |\Z)", prompt, re.M | re.S):
        for other, prose in prose_by.items():
            if prose.split(".")[0] in body:
                labels[other] = label
    ranking = [labels[s] for s in ranking_by[seat] if s in labels]
    return ("I looked at each finding.\n\n```json\n"
            + json.dumps({"votes": votes, "ranking": ranking}) + "\n```\n")


def seat(name: str, review=None, repair=None, judge=None):
    """A seat's reply function; ``review``/``repair``/``judge`` override a stage's Reply."""
    def reply(body, n):
        kind = kind_of(body)
        if kind == "review":
            return review if review is not None else Reply(text=review_text(name))
        if kind == "repair":
            return repair if repair is not None else Reply(
                text=f"```json\n{json.dumps(FINDINGS[name])}\n```")
        if kind == "judge":
            return judge if judge is not None else Reply(
                text=judgement(body["messages"][-1]["content"], name))
        return Reply(status=500, error_message=f"seat {name} got a {kind} prompt")
    return reply


def chair(answer: str = SYNTHESIS, verdict_fix: str = "VERDICT: rethink"):
    def reply(body, n):
        kind = kind_of(body)
        if kind == "chair":
            return Reply(text=answer)
        if kind == "verdict-repair":
            return Reply(text=verdict_fix)
        return Reply(status=500, error_message=f"chair got a {kind} prompt")
    return reply


# -- running it ----------------------------------------------------------------------------

def council(*args: str, input: str | None = None):
    """``orch council ARGS``: in-process, or through a warm daemon (the ``both_ways`` param)."""
    return invoke(["council", *args], input=input)


both_ways = pytest.mark.usefixtures("both_ways")  # every assertion holds both ways


def run_council(*extra: str, models: str = SEATS, chair_model: str = "scripted/delta"):
    result = council("run", "-p", "Review this change to the query layer.", "-m", models,
                     "--chair", chair_model, "--json", *extra)
    doc = json.loads(result.stdout) if result.stdout.strip().startswith("{") else None
    return result, doc


def script_bench(srv, **overrides):
    for name in ("alpha", "bravo", "charlie"):
        srv.script(name, overrides.get(name) or seat(name))
    srv.script("delta", overrides.get("delta") or chair())


def kinds_sent(srv, model: str) -> list[str]:
    return [kind_of(r.body) for r in srv.requests_for(model)]


def spend_rows(home, run_id):
    con = sqlite3.connect(home / "ledger.db")
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute("select * from spend where run_id = ? order by id",
                                         (run_id,))]


def council_rows(home, run_id):
    con = sqlite3.connect(home / "ledger.db")
    con.row_factory = sqlite3.Row
    return {r["model"]: dict(r) for r in con.execute(
        "select * from council where run_id = ?", (run_id,))}


ARTIFACTS = {"run.json", "briefing.md", "bundle.json", "bundle.md", "chair-packet.md",
             "chair-output.md", "tally.json", "verdict.json", "report.md", "report.html"}


@both_ways
def test_a_clean_three_seat_run(orch, scripted_server, orch_home):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    script_bench(scripted_server)
    result, doc = run_council()
    assert result.exit_code == 0, result.output
    assert doc["status"] == "complete" and doc["verdict"] == "fix-first"
    assert doc["chair"]["model"] == "scripted/delta" and doc["notices"] == []
    # the hand-computed scenario (see VOTES): one tier each
    assert doc["tiers"] == {"confirmed": 1, "contested": 1, "singleton": 1, "disputed": 1}
    run_dir = orch_home / "runs" / f"council-{doc['run_id']}"
    tally = json.loads((run_dir / "tally.json").read_text())
    by_claim = {g["claim"]: g for g in tally["groups"]}
    sql = next(g for g in tally["groups"] if "injection" in g["claim"])
    assert sql["tier"] == "confirmed" and len(tally["groups"]) == 4
    assert sorted(sql["seats"]) == ["scripted/alpha", "scripted/bravo"]  # one group, two seats
    assert sql["severity"] == "blocker"
    # its co-authors alpha and bravo are not eligible: charlie alone judges it
    assert sql["counts"] == {"agree": 1, "dispute": 0, "neutral": 0, "judges": 1,
                             "missing": 0, "raised_by": 2}
    assert by_claim["race condition when the cache refreshes"]["tier"] == "contested"
    assert by_claim["helper lacks a docstring"]["tier"] == "singleton"
    assert by_claim["variable name x is unclear"]["tier"] == "disputed"
    seats = {s["model"]: s for s in doc["seats"]}
    assert {m: s["street_cred"] for m, s in seats.items()} == {
        "scripted/alpha": 1.0, "scripted/bravo": 0.5, "scripted/charlie": 0.0}
    assert {m: s["confirmed"] for m, s in seats.items()} == {
        "scripted/alpha": 1, "scripted/bravo": 1, "scripted/charlie": 0}
    assert all(s["conformed"] and s["source"] == "block" for s in seats.values())
    # every artifact is there, and run.json lists them
    names = {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file()
             and "waves/" not in p.relative_to(run_dir).as_posix()}
    assert ARTIFACTS <= names
    for n, m in enumerate(("alpha", "bravo", "charlie"), start=1):
        for suffix in (".md", ".json"):
            assert f"reviews/{n}-scripted-{m}{suffix}" in names
            assert f"judgements/{n}-scripted-{m}{suffix}" in names
        assert f"judgements/{n}-scripted-{m}.prompt.md" in names
    assert sorted(doc["artifacts"]) == sorted(names)  # each once
    assert json.loads((run_dir / "run.json").read_text()) == doc
    assert json.loads((run_dir / "verdict.json").read_text())["verdict"] == "fix-first"
    report = (run_dir / "report.md").read_text()
    assert "Tiers report peer concurrence, never verification." in report
    assert "**Verdict: fix-first**" in report
    html = (run_dir / "report.html").read_text()
    assert '<table class="matrix">' in html and "<script" not in html
    assert 'href="http' not in html
    packet = (run_dir / "chair-packet.md").read_text()
    assert "Tiers report peer concurrence, never verification." in packet
    assert "### scripted/alpha" in packet and "Speaking as alpha" in packet  # de-anonymised
    # stages on one shared server: 3 reviews, 3 judgements, 1 chair call
    assert [s["name"] for s in doc["stages"]] == ["review", "judge", "chair-1"]
    assert doc["requests"] == scripted_server.count() == 7
    assert kinds_sent(scripted_server, "alpha") == ["review", "judge"]
    assert kinds_sent(scripted_server, "delta") == ["chair"]
    # every seat, judge and chair call in the spend ledger, attributed to the run
    rows = spend_rows(orch_home, doc["run_id"])
    assert sorted(r["kind"] for r in rows) == ["chair"] + ["judge"] * 3 + ["seat"] * 3
    assert doc["cost_exact"] and doc["cost_usd"] == pytest.approx(
        sum(r["cost_usd"] for r in rows))
    ledger = council_rows(orch_home, doc["run_id"])
    assert ledger["scripted/alpha"]["role"] == "seat"
    assert ledger["scripted/alpha"]["findings_blocker"] == 1
    assert ledger["scripted/alpha"]["findings_minor"] == 1
    assert ledger["scripted/alpha"]["confirmed"] == 1
    assert ledger["scripted/bravo"]["street_cred"] == 0.5
    assert ledger["scripted/delta"]["role"] == "chair"
    assert ledger["scripted/delta"]["verdict"] == "fix-first"


@both_ways
def test_judges_never_see_a_model_name(orch, scripted_server, orch_home):
    orch.provider()
    script_bench(scripted_server)
    result, doc = run_council()
    assert result.exit_code == 0, result.output
    run_dir = orch_home / "runs" / f"council-{doc['run_id']}"
    names = re.compile(r"alpha|bravo|charlie|delta|scripted", re.I)
    scanned = [run_dir / "bundle.md", run_dir / "bundle.json",
               *sorted((run_dir / "judgements").glob("*.prompt.md"))]
    assert len(scanned) == 5
    for path in scanned:
        assert not names.search(path.read_text()), path
    # and on the wire: what each judge was actually sent
    judge_prompts = [r.body["messages"][-1]["content"] for r in scripted_server.chats
                     if kind_of(r.body) == "judge"]
    assert len(judge_prompts) == 3
    for prompt in judge_prompts:
        assert not names.search(prompt)
        assert "[redacted]" in prompt or "Speaking as" not in prompt
    # alpha's self-description was redacted in the bundle, not lost
    assert "Speaking as [redacted] ([redacted])" in (run_dir / "bundle.md").read_text()
    # a judge does not see its own review, and sees the others in its own order
    bundle = json.loads((run_dir / "bundle.json").read_text())
    label = {s["model"]: s["label"] for s in doc["seats"]}
    alpha_view = (run_dir / "judgements" / "1-scripted-alpha.prompt.md").read_text()
    assert f"### {label['scripted/alpha']}" not in alpha_view
    assert f"### {label['scripted/bravo']}" in alpha_view
    assert doc["anonymity"]["leaks"] == {} and doc["anonymity"]["checked"] == 4
    assert {r["label"] for r in bundle["reviews"]} == set(label.values())


@both_ways
def test_garbage_json_is_repaired_or_reprompted(orch, scripted_server, orch_home):
    orch.provider()
    repairable = ('[{"id": "1", severity: "blocker", "claim": "SQL injection: build_query '
                  "concatenates user input\", 'location': 'db.py:10',}, "
                  '{"id": "2", "severity": "minor", "claim": "helper lacks a docstring", '
                  '"location": "util.py:3"')  # unquoted key, single quotes, no closing ]
    script_bench(
        scripted_server,
        alpha=seat("alpha", review=Reply(text=review_text("alpha", repairable))),
        bravo=seat("bravo", review=Reply(text=PROSE["bravo"] + "\nNo block, sorry.")),
        charlie=seat("charlie", review=Reply(text=review_text("charlie", "}}} not json {{")),
                     repair=Reply(text="I would rather not.")))
    result, doc = run_council()
    assert result.exit_code == 0, result.output
    seats = {s["model"]: s for s in doc["seats"]}
    # alpha: json-repair fixed it, no extra request
    assert seats["scripted/alpha"]["source"] == "json-repair"
    assert seats["scripted/alpha"]["findings"]["blocker"] == 1
    assert kinds_sent(scripted_server, "alpha") == ["review", "judge"]
    # bravo: nothing to repair, so one repair re-prompt, which worked
    assert seats["scripted/bravo"]["source"] == "re-prompt" and seats["scripted/bravo"][
        "conformed"]
    assert kinds_sent(scripted_server, "bravo") == ["review", "repair", "judge"]
    repair_prompt = scripted_server.requests_for("bravo")[1].body["messages"][-1]["content"]
    assert "there is no fenced JSON findings block" in repair_prompt
    assert "No block, sorry." in repair_prompt
    # charlie: repair failed, then the re-prompt failed too: prose kept, non-conforming
    assert kinds_sent(scripted_server, "charlie") == ["review", "repair", "judge"]
    assert seats["scripted/charlie"]["conformed"] is False
    assert seats["scripted/charlie"]["raised"] == 0
    assert any("scripted/charlie gave no readable findings block" in n for n in doc["notices"])
    run_dir = orch_home / "runs" / f"council-{doc['run_id']}"
    bundle = (run_dir / "bundle.md").read_text()
    assert "Concurrency is the weak spot" in bundle and "no readable findings block" in bundle
    assert council_rows(orch_home, doc["run_id"])["scripted/charlie"]["conformed"] == 0
    assert [s["name"] for s in doc["stages"]] == ["review", "repair", "judge", "chair-1"]


@both_ways
def test_a_dead_seat_is_retried_once_then_announced(orch, scripted_server, orch_home):
    orch.provider()
    script_bench(scripted_server, charlie=Reply(status=500, error_message="upstream exploded"))
    result = council("run", "-p", "Review this.", "-m", SEATS, "--chair", "scripted/delta")
    assert result.exit_code == 2, result.output
    assert scripted_server.count("charlie") == 2  # the review, and one retry
    assert "Notice" not in result.stdout
    notice = next(line for line in result.stderr.splitlines() if "did not review" in line)
    assert notice.startswith("orch: seat scripted/charlie did not review — server_error: ")
    assert notice.endswith("upstream exploded")
    assert "verdict: fix-first" in result.stdout
    doc = json.loads(next((orch_home / "runs").glob("council-*/run.json")).read_text())
    assert doc["status"] == "degraded" and doc["degraded"] == ["seat lost"]
    charlie = doc["seats"][2]
    assert charlie["status"] == "lost" and charlie["retried"] and len(charlie["legs"]) == 2
    assert [s["name"] for s in doc["stages"]] == ["review", "review-retry", "judge", "chair-1"]
    # the two who reviewed judged each other; charlie's lost review is in nobody's view
    assert kinds_sent(scripted_server, "alpha") == ["review", "judge"]
    # the injection both raised has no eligible judge left: a singleton, not confirmed
    assert doc["tiers"] == {"confirmed": 0, "contested": 0, "singleton": 2, "disputed": 1}
    rows = spend_rows(orch_home, doc["run_id"])
    assert [r["status"] for r in rows if r["model"] == "scripted/charlie"] == ["error", "error"]
    assert council_rows(orch_home, doc["run_id"])["scripted/charlie"]["reviewed"] == 0


@both_ways
def test_an_empty_review_is_an_error_as_in_fanout(orch, scripted_server, orch_home):
    orch.provider()
    script_bench(scripted_server, charlie=Reply(text=""))
    result = council("run", "-p", "Review this.", "-m", SEATS, "--chair", "scripted/delta")
    assert result.exit_code == 2, result.output
    assert scripted_server.count("charlie") == 2  # an error is retried once, like a crash
    doc = json.loads(next((orch_home / "runs").glob("council-*/run.json")).read_text())
    charlie = doc["seats"][2]
    assert charlie["status"] == "lost"
    rows = [r for r in spend_rows(orch_home, doc["run_id"]) if r["model"] == "scripted/charlie"]
    assert [r["status"] for r in rows] == ["error", "error"]
    assert all(r["reason"].startswith("empty_answer: scripted/charlie answered with neither "
                                      "text nor a tool call") for r in rows)


@both_ways
def test_fewer_than_two_reviews_is_council_quorum(orch, scripted_server, orch_home):
    orch.provider()
    dead = Reply(status=503)
    script_bench(scripted_server, bravo=dead, charlie=dead)
    result, doc = run_council()
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1].startswith(  # after the notices: one error line
        "orch: error: COUNCIL_QUORUM: only 1 of 3 seats reviewed")
    assert doc["status"] == "quorum" and doc["verdict"] is None
    assert scripted_server.count("delta") == 0
    assert kinds_sent(scripted_server, "alpha") == ["review"]  # no judging, no chair
    run_dir = orch_home / "runs" / f"council-{doc['run_id']}"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "quorum"


@pytest.mark.parametrize("args, message, code", [  # a usage mistake exits 2, the set-up's 1
    (["-m", SEATS, "--chair", "scripted/alpha"], "the chair scripted/alpha is also a seat", 2),
    (["-m", SEATS + ",scripted/x@hot", "--chair", "scripted/x@hot"],
     "the chair scripted/x@hot is also a seat (scripted/x@hot: same model, same variant)", 2),
    (["-m", "scripted/alpha", "--chair", "scripted/delta"], "at least 2 seats, got 1", 2),
    (["-m", "scripted/alpha,scripted/alpha", "--chair", "scripted/delta"], "sits on two seats",
     2),
    (["-m", SEATS], "no chair: pass --chair MODEL", 2),
    (["-m", SEATS, "--chair", "nowhere/model"], "litellm does not know the provider", 2),
    (["-m", "scripted/alpha,openai/gpt-4o-mini", "--chair", "scripted/delta"],
     "needs OPENAI_API_KEY", 1),
    (["-m", SEATS, "--chair", "keyed/delta"], "needs $KEYED_API_KEY", 1),
    (["-m", SEATS, "--chair", "scripted/delta", "--context", "/no/such/file"],
     "does not exist", 2),
    (["-m", SEATS, "--chair", "scripted/delta", "--diff", "no-such-rev..HEAD"],
     "--diff needs a git work tree", 1),
])
@both_ways
@pytest.mark.refused_before_the_daemon  # prepared in the client: no word reaches it
def test_preflight_refuses_before_any_request(orch, scripted_server, monkeypatch, tmp_path,
                                              args, message, code):
    orch.provider()
    orch.provider("keyed", api_key_env="KEYED_API_KEY")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("KEYED_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    script_bench(scripted_server)
    result = council("run", "-p", "Review.", *args)
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert "not in --models" not in result.stderr  # it never claims what may be untrue
    assert scripted_server.count() == 0


@both_ways
def test_a_variant_of_a_seats_model_may_chair_with_one_notice(orch, scripted_server):
    """The chair shares alpha's weights, not alpha's review: allowed, and said once."""
    orch.provider()
    script_bench(scripted_server)
    as_seat, as_chair = seat("alpha"), chair()
    scripted_server.script("alpha", lambda body, n: (
        as_chair if kind_of(body) in ("chair", "verdict-repair") else as_seat)(body, n))
    result, doc = run_council(chair_model="scripted/alpha@cold")
    assert result.exit_code == 0, result.output
    assert doc["verdict"] == "fix-first" and doc["chair"]["model"] == "scripted/alpha@cold"
    assert doc["notices"] == ["the chair scripted/alpha@cold is a variant of the seat "
                              "scripted/alpha: it shares that seat's weights, with its own "
                              "sampling settings"]
    assert kinds_sent(scripted_server, "alpha") == ["review", "judge", "chair"]


@pytest.mark.parametrize("echo, expected_verdict, exit_code", [
    (Reply(text="The injection must go.\nVERDICT: rethink"), "rethink", 0),
    (Reply(status=500), None, 2),
])
@both_ways
def test_a_failed_chair_walks_retry_then_promotion_then_null(
        orch, scripted_server, orch_home, echo, expected_verdict, exit_code):
    from orchestrator.ledger.council_rows import CouncilLedger

    orch.provider()
    CouncilLedger().append([  # an earlier track record: echo has the best non-seat cred
        {"run_id": "old", "model": "scripted/alpha", "role": "seat", "status": "reviewed",
         "reviewed": True, "street_cred": 1.0},
        {"run_id": "old", "model": "scripted/echo", "role": "seat", "status": "reviewed",
         "reviewed": True, "street_cred": 0.8},
        {"run_id": "old", "model": "scripted/foxtrot", "role": "seat", "status": "reviewed",
         "reviewed": True, "street_cred": 0.2}])
    script_bench(scripted_server, delta=Reply(status=500, error_message="chair down"))
    scripted_server.script("echo", echo)
    result, doc = run_council()
    assert result.exit_code == exit_code, result.output
    attempts = doc["chair_attempts"]
    assert [(a["role"], a["model"], a["status"]) for a in attempts] == [
        ("chair", "scripted/delta", "error"), ("retry", "scripted/delta", "error"),
        ("promoted", "scripted/echo", "complete" if expected_verdict else "error")]
    assert doc["verdict"] == expected_verdict and doc["chair"]["promoted"] == "scripted/echo"
    assert scripted_server.count("delta") == 2 and scripted_server.count("echo") == 1
    assert scripted_server.count("foxtrot") == 0
    assert any("promoted scripted/echo" in n for n in doc["notices"])
    if expected_verdict is None:
        assert doc["degraded"] == ["no verdict"]
    rows = council_rows(orch_home, doc["run_id"])
    assert rows["scripted/delta"]["status"] == "failed"
    assert rows["scripted/echo"]["verdict"] == expected_verdict
    assert sum(r["kind"] == "chair" for r in spend_rows(orch_home, doc["run_id"])) == 3


@both_ways
def test_a_missing_verdict_gets_one_repair_prompt(orch, scripted_server, orch_home):
    orch.provider()
    script_bench(scripted_server, delta=chair(answer="Fix the injection.",
                                              verdict_fix="VERDICT: fix-first"))
    result, doc = run_council()
    assert result.exit_code == 0, result.output
    assert kinds_sent(scripted_server, "delta") == ["chair", "verdict-repair"]
    assert doc["verdict"] == "fix-first"
    assert [a["role"] for a in doc["chair_attempts"]] == ["chair", "verdict-repair"]
    run_dir = orch_home / "runs" / f"council-{doc['run_id']}"
    assert (run_dir / "chair-output.md").read_text() == "Fix the injection."


@both_ways
def test_no_chair_and_no_promotion_means_a_null_verdict(orch, scripted_server):
    orch.provider()
    script_bench(scripted_server, delta=Reply(status=500))
    result, doc = run_council()
    assert result.exit_code == 2
    assert doc["verdict"] is None and len(doc["chair_attempts"]) == 2
    assert any("no non-seat model in council stats" in n for n in doc["notices"])
    assert "No verdict" in (json.loads(json.dumps(doc)) and
                            open(f"{doc['dir']}/report.md").read())


@both_ways
def test_a_cut_review_is_marked_cut(orch, scripted_server, orch_home):
    orch.provider()
    cut = review_text("charlie")[:-8]  # the closing fence never came
    script_bench(scripted_server, charlie=seat("charlie", review=Reply(
        text=cut, finish_reason="length")))
    result, doc = run_council()
    assert result.exit_code == 0, result.output
    charlie = doc["seats"][2]
    assert charlie["cut"] is True and charlie["conformed"] and charlie["raised"] == 1
    run_dir = orch_home / "runs" / f"council-{doc['run_id']}"
    # one mark (chair/marks.py) in the chair's packet and the judges' bundle
    from orchestrator.chair.marks import CUT

    assert CUT in (run_dir / "chair-packet.md").read_text()
    assert CUT in (run_dir / "bundle.md").read_text()
    assert any("CUT" in n for n in doc["notices"])


@both_ways
def test_diff_and_context_are_assembled_once(orch, scripted_server, orch_home, tmp_path,
                                             monkeypatch):
    import subprocess

    orch.provider()
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "db.py").write_text("def q(x):\n    return 'select ' + x\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    (repo / "db.py").write_text("def q(x):\n    return f'select {x} -- unsafe'\n")
    subprocess.run([*git, "commit", "-qam", "two"], check=True)
    (repo / "NOTES.txt").write_text("house rule: parameters only\n")
    monkeypatch.chdir(repo)
    script_bench(scripted_server)
    result, doc = run_council("--diff", "HEAD~1..HEAD", "--context", "NOTES.txt")
    assert result.exit_code == 0, result.output
    assert doc["context"] == {"diff": "HEAD~1..HEAD", "files": ["NOTES.txt"]}
    for r in scripted_server.chats:
        if kind_of(r.body) in ("review", "judge", "chair"):
            text = r.body["messages"][-1]["content"]
            assert "+    return f'select {x} -- unsafe'" in text
            assert "house rule: parameters only" in text


@both_ways
def test_human_output_and_council_stats(orch, scripted_server, ledger_url):
    """Runs on SQLite and on PostgreSQL (ledger_url): the run's rows and its stats."""
    orch.provider()
    script_bench(scripted_server)
    result = council("run", "-p", "Review.", "-m", SEATS, "--chair", "scripted/delta", "-q")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "verdict: fix-first (chair scripted/delta)" in out
    assert "Tiers report peer concurrence, never verification." in out
    assert "Tiers: 1 confirmed · 1 contested · 1 singleton · 1 disputed" in out
    assert "[confirmed] blocker db.py:10" in out and "== chair: scripted/delta" in out
    assert re.search(r"^      also F\d+: (SQL injection|build_query)", out, re.M)  # every claim
    assert "report.html" not in out  # where the report is: an `orch:` line (test_messages)
    stats = council("stats", "--json")
    assert stats.exit_code == 0
    rows = {s["model"]: s for s in json.loads(stats.stdout)}
    assert rows["scripted/alpha"]["street_cred"] == 1.0
    assert rows["scripted/alpha"]["raised"] == 2 and rows["scripted/alpha"]["confirmed"] == 1
    assert rows["scripted/delta"]["chair_runs"] == 1 and rows["scripted/delta"]["verdicts"] == 1
    assert [s["model"] for s in json.loads(stats.stdout)][:3] == [
        "scripted/alpha", "scripted/bravo", "scripted/charlie"]
    table = council("stats")
    assert table.exit_code == 0 and "scripted/charlie" in table.stdout
    assert "street-cred" in table.stdout
    from orchestrator.ledger.council_rows import CouncilLedger
    from orchestrator.ledger.spend import Ledger

    who = {(r["user"], r["host"]) for r in CouncilLedger().rows() + Ledger().rows()}
    assert len(who) == 1 and all(who.pop())  # every row says who and where


def test_stats_with_no_runs(orch):
    result = council("stats")
    assert result.exit_code == 0 and "no council runs yet" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(2, 130), (15, 143)])
@both_ways
def test_a_signal_mid_run_still_writes_run_json(orch, scripted_server, orch_home, signum,
                                                code):
    import os
    import signal
    import subprocess
    import sys
    import time

    orch.provider()
    slow_judge = Reply(text="never", latency=60)
    script_bench(scripted_server, **{n: seat(n, judge=slow_judge)
                                     for n in ("alpha", "bravo", "charlie")})
    env = dict(os.environ, ORCH_HOME=str(orch_home))
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "council", "run", "-p", "x",
                             "-m", SEATS, "--chair", "scripted/delta", "--json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while (sum(kind_of(r.body) == "judge" for r in scripted_server.chats) < 3
           and time.monotonic() < deadline):
        time.sleep(0.1)
    time.sleep(0.2)
    proc.send_signal(signal.Signals(signum))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    doc = json.loads(out)
    assert doc["status"] == "aborted" and doc["exit_code"] == code and doc["signal"] == signum
    assert [s["name"] for s in doc["stages"]] == ["review", "judge"]
    assert doc["stages"][1]["status"] == "aborted"
    assert scripted_server.count("delta") == 0
    run_dir = orch_home / "runs" / f"council-{doc['run_id']}"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "aborted"
    rows = spend_rows(orch_home, doc["run_id"])
    assert sorted(r["status"] for r in rows if r["kind"] == "judge") == ["aborted"] * 3
    con = sqlite3.connect(orch_home / "ledger.db")  # an aborted run is no track record
    assert con.execute("select count(*) from council").fetchone() == (0,)  # (table: migrations)


@both_ways
def test_seats_can_read_the_workspace_and_the_chair_gets_no_tools(orch, scripted_server,
                                                                  tmp_path, monkeypatch):
    orch.provider()
    (tmp_path / "db.py").write_text("def build_query(x):\n    return 'select ' + x\n")
    (tmp_path / ".git").mkdir()  # the default workspace is the git work tree
    monkeypatch.chdir(tmp_path)

    def reader(body, n):  # alpha reads db.py first, then reviews
        if kind_of(body) == "review" and body["messages"][-1]["role"] == "user":
            return Reply(tool_calls=[{"name": "read", "arguments": {"path": "db.py"}}])
        return seat("alpha")(body, n)

    script_bench(scripted_server, alpha=reader)
    result, doc = run_council()
    assert result.exit_code == 0, result.output
    second = scripted_server.requests_for("alpha")[1].body
    assert "return 'select ' + x" in second["messages"][-1]["content"]
    assert doc["seats"][0]["conformed"] and doc["seats"][0]["raised"] == 2
    review_tools = {t["function"]["name"] for t in scripted_server.requests_for("bravo")[0]
                    .body["tools"]}
    assert {"read", "grep"} <= review_tools
    assert "tools" not in scripted_server.requests_for("delta")[0].body
    none = council("run", "-p", "x", "-m", SEATS, "--chair", "scripted/delta", "--tools",
                   "none", "--json")
    assert none.exit_code == 0
    assert "tools" not in scripted_server.chats[-2].body  # a judge, with --tools none


@both_ways
def test_max_cost_bounds_the_whole_run_not_each_stage(orch, scripted_server, orch_home):
    # output at $1000/Mtok: a launch claims 4096 reserved tokens = $4.10; reviews cost ~$3 each
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1000.0)
    dear = {n: seat(n, review=Reply(text=review_text(n), usage={"completion_tokens": 3000}))
            for n in ("alpha", "bravo", "charlie")}
    script_bench(scripted_server, **dear)
    result, doc = run_council("--max-cost", "13")
    assert result.exit_code == 2, result.output
    # all three reviews fit in $13; they spent ~$9, so no judge ($4.10 each) may launch,
    # although each stage alone would have fitted under $13
    assert [kinds_sent(scripted_server, n) for n in ("alpha", "bravo", "charlie")] == [
        ["review"]] * 3
    judge_stage = next(s for s in doc["stages"] if s["name"] == "judge")
    assert judge_stage["status"] == "error"
    assert scripted_server.count("delta") == 0  # the chair was refused too: nothing sent
    assert doc["verdict"] is None and doc["max_cost"] == 13
    assert doc["cost_usd"] <= 13
    assert "judges short" in doc["degraded"] and "budget" in doc["degraded"]
    assert any("COST_CEILING" in n for n in doc["notices"])
    rows = spend_rows(orch_home, doc["run_id"])
    assert sorted({r["status"] for r in rows if r["kind"] in ("judge", "chair")}) == ["refused"]
    # a refused judge is not retried: the same check would refuse it again
    assert not any(s["name"] == "judge-retry" for s in doc["stages"])


@both_ways
def test_a_key_a_seat_echoes_reaches_no_artifact_and_no_other_model(orch, scripted_server,
                                                                    orch_home, monkeypatch):
    secret = "sk-test-TOPSECRET-0123456789abcdef"
    monkeypatch.setenv("SCRIPTED_API_KEY", secret)
    orch.provider(api_key_env="SCRIPTED_API_KEY")
    leaky = Reply(text=f"My key is {secret}.\n\n```json\n" + json.dumps(
        [{**FINDINGS["alpha"][0], "rationale": f"found {secret} in env"}]) + "\n```")
    script_bench(scripted_server, alpha=seat("alpha", review=leaky))
    result, doc = run_council()
    assert result.exit_code == 0, result.output
    assert secret not in result.output
    run_dir = orch_home / "runs" / f"council-{doc['run_id']}"
    for path in run_dir.rglob("*"):
        if path.is_file() and "waves" not in path.parts:
            assert secret not in path.read_text(), path
    others = [r for r in scripted_server.chats if r.model != "alpha"
              and kind_of(r.body) in ("judge", "chair")]
    assert others and all(secret not in json.dumps(r.body["messages"]) for r in others)


@both_ways
def test_a_saved_council_and_the_default_chair(orch, scripted_server):
    orch.provider()
    orch.config(defaults={"chair": "scripted/delta"})
    assert council("save", "reviewers", "--models", SEATS).exit_code == 0
    script_bench(scripted_server)
    result = council("run", "-p", "Review.", "--council", "reviewers", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [s["model"] for s in doc["seats"]] == SEATS.split(",")
    assert doc["chair"]["model"] == "scripted/delta" and doc["verdict"] == "fix-first"


def test_stats_show_runs_and_a_95_interval_from_five_ranked_runs(orch):
    from orchestrator.ledger.council_rows import CouncilLedger, interval95

    rows = []
    for i, cred in enumerate([1.0, 0.5, 1.0, 0.5, 0.75]):
        rows.append({"run_id": f"r{i}", "model": "p/five", "role": "seat",
                     "status": "reviewed", "reviewed": True, "street_cred": cred})
        if i < 4:
            rows.append({"run_id": f"r{i}", "model": "p/four", "role": "seat",
                         "status": "reviewed", "reviewed": True, "street_cred": 1.0})
    rows.append({"run_id": "old", "model": "p/four", "role": "seat", "status": "reviewed",
                 "reviewed": True, "street_cred": 1.8})  # an old mean rank: not comparable
    CouncilLedger().append(rows)
    stats = {s["model"]: s for s in json.loads(council("stats", "--json").stdout)}
    five, four = stats["p/five"], stats["p/four"]
    assert five["ranked_runs"] == 5 and five["street_cred"] == 0.75
    low, high = five["street_cred_ci95"]
    assert 0 <= low < 0.75 < high <= 1
    assert (low, high) == tuple(interval95([1.0, 0.5, 1.0, 0.5, 0.75]))
    assert four["runs"] == 5 and four["ranked_runs"] == 4 and four["street_cred_ci95"] is None
    assert four["street_cred"] == 1.0
    assert [s["model"] for s in stats.values()][:2] == ["p/four", "p/five"]  # higher first
    table = council("stats").stdout
    assert f"0.75 [{low:.2f}–{high:.2f}] (n=5)" in table and "1.00 (n=4)" in table
