"""A deliberating bench contestant (issue 30 item 6), end to end through the real `orch bench`
entry point, HTTP to the scripted server and a real SQLite ledger.

Each task's hidden check wants two codes; in round 1 each model knows at most one, so every
round-1 answer fails (a one-round fanout, even graded as "any member passes", fails every
task). From round 2 a scripted leg writes the codes it reads in the round prompt (its own
answer and its peers', as orch quoted them): the answers it adopts are the ones orch showed
it, so a deliberation that did not pass peers' answers along could not pass."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from ledger_rows import ledger_rows

from orchestrator.testing.daemon import invoke
from orchestrator.testing.scripted_server import Reply

TASKS = [f"t{i}" for i in range(6)]
USAGE = {"prompt_tokens": 100, "completion_tokens": 10}
PER_REQUEST = (100 * 1.0 + 10 * 2.0) / 1e6  # the provider's prices below
CODES = re.compile(r"\b(?:CODE|PART)-t\d+\b")


def block(**data) -> str:
    return f"```json\n{json.dumps(data)}\n```"


def leg(model: str):
    """Round 1: what this model knows alone. Later rounds: every code its conversation shows
    (its own answers, which orch points at rather than repeat, and its peers' in the round
    prompt), revised into one answer, and a vote for a peer that had a code."""

    def reply(body, n):
        prompt = str(body["messages"][-1]["content"])
        if "<<<Answer" not in prompt:  # round 1 (a plain fanout's only round too)
            task = re.search(r"Task (t\d+)", prompt).group(1)
            said = {"a": f"The first half is CODE-{task}.",
                    "b": f"The second half is PART-{task}.", "c": "I do not know."}[model]
            return Reply(text=said, usage=USAGE)
        said = [str(m["content"]) for m in body["messages"] if m["role"] == "assistant"]
        everything = "\n".join(str(m["content"]) for m in body["messages"])
        shown = {m.group(1): m.group(2) for m in re.finditer(
            r"<<<(Answer [A-Z]) \[\w+\]\n(.*?)\n\1 \[\w+\]>>>", prompt, re.S)}
        merged = "The codes are " + " ".join(sorted(set(CODES.findall(everything)))) + "."
        vote = next((lb for lb in sorted(shown) if CODES.search(shown[lb])), sorted(shown)[0])
        if said and said[-1].startswith(merged):
            return Reply(text="Mine stands.\n" + block(decision="keep", vote=vote,
                                                        reason="it has both codes"),
                         usage=USAGE)
        return Reply(text=merged + "\n\n" + block(decision="revise", vote=vote,
                                                   reason="it had a code I lacked"),
                     usage=USAGE)
    return reply


def write_bench(tmp_path, deliberating: str, *, plain: bool = True) -> object:
    cases = tmp_path / "cases"
    cases.mkdir()
    for task in TASKS:
        (cases / f"{task}.json").write_text(json.dumps(
            {"id": task, "task": f"Task {task}: what are the two halves of the code?",
             "expect": {"contains": [f"CODE-{task}", f"PART-{task}"]},
             "solution": f"CODE-{task} PART-{task}"}))
    config = tmp_path / "bench.toml"
    config.write_text(textwrap.dedent("""\
        [bench]
        cases = "cases"
        trials = 1
        jobs = 8
        """) + (textwrap.dedent("""
        [[contestants]]
        name = "plain"
        kind = "fanout"
        models = ["scripted/a", "scripted/b", "scripted/c"]
        tools = "none"
        """) if plain else "") + textwrap.dedent("""
        [[contestants]]
        name = "deliberate"
        kind = "fanout"
        models = ["scripted/a", "scripted/b", "scripted/c"]
        tools = "none"
        """) + deliberating)
    return config


@pytest.mark.slow
def test_deliberation_beats_one_round_in_the_paired_table(orch, scripted_server, tmp_path,
                                                          orch_home):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    for model in "abc":
        scripted_server.script(model, leg(model))
    config = write_bench(tmp_path, "rounds = 4\npeers = 2\n")
    out = tmp_path / "r.json"
    result = invoke(["bench", "--config", str(config), "--yes", "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output[-3000:]
    doc = json.loads(out.read_text())
    plain = [r for r in doc["trials"] if r["contestant"] == "plain"]
    deliberate = [r for r in doc["trials"] if r["contestant"] == "deliberate"]
    assert len(plain) == len(deliberate) == 6
    # one round: each member has one half at most, so even "any member passes" fails
    assert not any(r["passed"] for r in plain)
    # deliberating: round 2 merges the halves: every leg holds one answer -> stop
    # `consensus` at once (no third round to repeat it); their votes were for the answers
    # they merged from, whose holders now hold their own: none counts, all hold the winner
    assert all(r["passed"] and not r["excluded"] for r in deliberate), deliberate[0]
    for r in deliberate:
        d = r["deliberation"]
        assert (d["rounds"], d["max_rounds"], d["peers"]) == (2, 4, 2)
        assert (d["stop"], d["after_round"], d["also"]) == ("consensus", 2, [])
        assert d["answer_from"] == "most held (no vote counted)" and d["winner_votes"] == 0
        assert [x["changed"] for x in d["per_round"]] == [0, 3]
        assert d["requests"] == 6 and r["answer"].startswith("The codes are CODE-")
        assert r["cost_usd"] == pytest.approx(6 * PER_REQUEST)
    assert all(r["cost_usd"] == pytest.approx(3 * PER_REQUEST) for r in plain)
    assert scripted_server.count() == 6 * 3 + 6 * 6

    # the paired table: deliberate against the one-round baseline, on all six tasks
    row = next(c for c in doc["stats"]["comparisons"] if c["contestant"] == "deliberate")
    assert (row["wins"], row["losses"], row["ties"], row["tasks"]) == (6, 0, 0, 6)
    assert row["delta"] == pytest.approx(1.0) and row["delta_ci"][0] > 0
    assert row["verdict"] == "better", row
    report = (out.with_suffix("") / "report.md").read_text()
    assert "fanout (scripted/a, scripted/b, scripted/c) (no chair: the deliberation's winner) " \
           "×4 rounds, 2 peers" in report

    # every round's requests are ledger rows under the bench's run id, the round in the
    # wave id, and `orch spend` counts what the cost column says
    bench_id = doc["bench_id"]
    rows = ledger_rows(orch_home)
    assert {r["run_id"] for r in rows} == {bench_id} and {r["kind"] for r in rows} == {"bench"}
    for r in deliberate:
        mine = [x for x in rows if x["wave_id"].startswith(r["wave_id"] + "-round-")]
        assert sorted({x["wave_id"] for x in mine}) == [f"{r['wave_id']}-round-{n}"
                                                        for n in (1, 2)]
        assert len(mine) == 6
        assert sum(x["cost_usd"] for x in mine) == pytest.approx(r["cost_usd"])
    spend = invoke(["spend", "--group-by", "wave", "--json"])
    assert spend.exit_code == 0, spend.output
    spent = json.loads(spend.stdout)
    assert spent["total_cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in doc["trials"]))
    rounds = {g["key"]: g for g in spent["groups"] if "-round-" in g["key"]}
    assert len(rounds) == 6 * 2 and all(g["legs"] == 3 for g in rounds.values())
    assert sum(g["cost_usd"] for g in rounds.values()) == pytest.approx(
        sum(r["cost_usd"] for r in deliberate))


@pytest.mark.parametrize(("setting", "said"), [
    ("rounds = 0\n", "`rounds` is a whole number from 1 to 20"),
    ('rounds = "3"\n', "`rounds` is a whole number from 1 to 20"),
    ("rounds = 2.5\n", "`rounds` is a whole number from 1 to 20"),
    ("rounds = 3\npeers = 3\n", "`peers` is how many other answers each leg reads, a whole "
                                "number from 1 to 2 with 3 models"),
    ("rounds = 3\npeers = 0\n", "from 1 to 2 with 3 models"),
    ("peers = 2\n", "`peers` applies to a deliberation; add rounds = N"),
    # a fanout's `aggregate` (the majority graded): one value, and not beside a chair
    ('aggregate = "mean"\n', "`aggregate` is 'vote' (the majority of the final answers is "
                             "graded), not 'mean'"),
    ('aggregate = "vote"\nchair = "scripted/c"\n', '`aggregate = "vote"` and `chair` each '
                                                    "make the one answer a trial grades"),
])
def test_a_bad_rounds_or_peers_is_refused_in_one_line(orch, scripted_server, tmp_path, setting,
                                                      said):
    orch.provider()
    config = write_bench(tmp_path, setting)
    result = invoke(["bench", "--config", str(config), "--yes"])
    assert result.exit_code == 2, result.output
    assert "contestant 2 (deliberate)" in result.output and said in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert scripted_server.count() == 0


@pytest.mark.parametrize("kind", ["model", "council", "command"])
def test_rounds_on_a_kind_that_cannot_deliberate_is_refused(orch, tmp_path, kind):
    orch.provider()
    body = {"model": 'model = "scripted/a"\n',
            "council": 'models = ["scripted/a", "scripted/b"]\nchair = "scripted/c"\n',
            "command": 'command = "true"\n'}[kind]
    config = tmp_path / "bench.toml"
    config.write_text(f'[bench]\nbuiltin = "format"\n[[contestants]]\nname = "x"\n'
                      f'kind = "{kind}"\n{body}rounds = 3\n')
    result = invoke(["bench", "--config", str(config), "--yes"])
    assert result.exit_code == 2, result.output
    assert f"contestant 1 (x): `rounds` and `peers` apply to a fanout contestant, not a " \
           f"{kind} one" in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    if kind == "model":
        assert 'kind = "fanout" with models = ["m", "m", "m"]' in result.output


def test_the_dry_run_shows_rounds_times_legs(orch, scripted_server, tmp_path):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    config = write_bench(tmp_path, "rounds = 3\n")
    result = invoke(["bench", "--config", str(config), "--dry-run"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "deliberate: fanout(scripted/a,scripted/b,scripted/c) ×3 rounds (tools none, " \
           "max_steps 20; one deliberation per trial: up to 3 rounds × 3 legs = 9 requests, " \
           "peers default)" in out
    cost = {m[1]: float(m[2])
            for m in re.finditer(r"^  (\w+): ~.* tokens, \$([\d.]+)", out, re.M)}
    assert cost["deliberate"] == pytest.approx(3 * cost["plain"], rel=0.01)
    assert scripted_server.count() == 0


def chair(body, n):
    """The chair writes every code the final answers it is shown hold."""
    prompt = str(body["messages"][-1]["content"])
    assert "vote(s) from other legs in the deciding round (support " in prompt  # told
    return Reply(text="Synthesis: " + " ".join(sorted(set(CODES.findall(prompt)))),
                 usage=USAGE)


def test_with_a_chair_its_synthesis_is_graded(orch, scripted_server, tmp_path, orch_home):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    for model in "abc":
        scripted_server.script(model, leg(model))
    scripted_server.script("chair", chair)
    config = write_bench(tmp_path, 'rounds = 2\nchair = "scripted/chair"\n', plain=False)
    out = tmp_path / "r.json"
    result = invoke(["bench", "--config", str(config), "--yes", "--out", str(out), "-q",
                     "--only", "t0,t1"])
    assert result.exit_code == 0, result.output[-3000:]
    doc = json.loads(out.read_text())
    for r in doc["trials"]:
        d = r["deliberation"]
        assert r["passed"] and r["answer"].startswith("Synthesis: CODE-t")
        assert (d["answer_from"], d["rounds"], d["stop"]) == ("chair", 2, "consensus")
        assert d["requests"] == 7 and r["cost_usd"] == pytest.approx(7 * PER_REQUEST)
        chair_rows = [x for x in ledger_rows(orch_home)
                      if x["wave_id"] == f"{r['wave_id']}-round-chair"]
        assert [(x["kind"], x["model"]) for x in chair_rows] == [("chair", "scripted/chair")]
    assert scripted_server.count("chair") == 2


def test_the_ceiling_stops_a_trial_before_a_round_it_cannot_pay(orch, scripted_server,
                                                                tmp_path, orch_home):
    # a request costs 110 tokens x $100/M = $0.011; round 1's three launches claim about
    # $0.008 each (50 output tokens reserved); round 2's worst case is about $0.03 a leg,
    # more than the $0.027 left of $0.06: it is not launched, and round 1's answer is graded
    orch.provider(input_cost_per_mtok=100.0, output_cost_per_mtok=100.0, max_output_tokens=50)
    for model in "abc":
        scripted_server.script(model, leg(model))
    config = write_bench(tmp_path, "rounds = 3\n", plain=False)
    out = tmp_path / "r.json"
    result = invoke(["bench", "--config", str(config), "--yes", "--out", str(out), "-q",
                     "--only", "t0", "--max-cost", "0.06"])
    assert result.exit_code == 0, result.output[-3000:]
    (r,) = json.loads(out.read_text())["trials"]
    d = r["deliberation"]
    assert (d["stop"], d["after_round"], d["rounds"]) == ("ceiling", 1, 1), d
    assert any("round 2" in x for x in d["degraded"])
    # no vote was cast: the answer most legs hold is graded (three answers, one leg each:
    # the leg earliest in `models`), and fails
    assert d["answer_from"] == "most held (no vote counted)" and not r["passed"]
    assert not r["excluded"]
    assert r["answer"] == "The first half is CODE-t0."
    rows = ledger_rows(orch_home)
    assert {x["wave_id"] for x in rows} == {f"{r['wave_id']}-round-1"} and len(rows) == 3
    assert r["cost_usd"] == pytest.approx(3 * 0.011) and r["cost_usd"] <= 0.06
    assert scripted_server.count() == 3
    shown = invoke(["bench", "show", str(out), "t0", "deliberate"])
    assert shown.exit_code == 0, shown.output
    assert "deliberation: 1 of at most 3 rounds, stopped by ceiling after round 1; 3 " \
           "requests; graded: most held (no vote counted)" in shown.stdout
    # resumed with a larger ceiling, the failed trial deliberates to the end and passes:
    # the contestant's rounds came back from the results file
    again = invoke(["bench", "resume", str(out), "--retry-failed", "--yes", "-q",
                    "--max-cost", "1"])
    assert again.exit_code == 0, again.output[-3000:]
    (r,) = json.loads(out.read_text())["trials"]
    assert r["passed"] and r["deliberation"]["stop"] == "consensus"
    assert r["wave_id"].endswith("-r1-t0001") and scripted_server.count() == 3 + 6


@pytest.mark.slow
def test_sigint_in_round_two_cuts_the_trial_short_with_its_document(orch, scripted_server,
                                                                    tmp_path, orch_home):
    """A real SIGINT to a real `orch bench` process while round 2 is on the wire: exit 130,
    the trial kept and listed as cut short (never counted), the deliberation's own document
    final (stop `interrupted`), and no further round sent."""
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)

    def hang_later(model):
        first = leg(model)

        def reply(body, n):
            if "<<<Answer" in str(body["messages"][-1]["content"]):
                return Reply(hang=True)  # round 2: the interrupt finds it on the wire
            return first(body, n)
        return reply

    for model in "abc":
        scripted_server.script(model, hang_later(model))
    config = write_bench(tmp_path, "rounds = 3\n", plain=False)
    out = tmp_path / "r.json"
    err_path = tmp_path / "stderr.txt"
    with err_path.open("w") as err_file:
        proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "bench", "--config",
                                 str(config), "--yes", "--out", str(out), "--only", "t0"],
                                env=dict(os.environ, ORCH_HOME=str(orch_home)), cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=err_file, text=True)
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and sum(
                    "<<<Answer" in json.dumps(r.body) for r in scripted_server.requests) < 3:
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    err = err_path.read_text()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    (r,) = json.loads(out.read_text())["trials"]
    assert r["excluded"] == "interrupted: SIGINT arrived before it was graded"
    assert not r["passed"] and r["deliberation"]["stop"] == "interrupted"
    run = json.loads((orch_home / "runs" / r["wave_id"] / "wave.json").read_text())
    assert run["kind"] == "deliberation" and run["status"] == "aborted"
    assert run["stop"]["rule"] == "interrupted" and run["signal"] == signal.SIGINT
    assert scripted_server.count() == 6  # round 1 and round 2's three: no round 3
