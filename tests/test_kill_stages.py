"""`kill -9` of `orch council run` (every stage; in-process, and of the `orch serve` daemon
that runs it), `orch mcp` (its `fanout` and its `council_run` tool), `orch bench` (a model
trial; and, through the daemon, a deliberating trial) and `orch fanout --rounds` (in round 2;
in-process and through the daemon).

The model is tests/test_kill_matrix.py: the real process runs against the scripted server,
some requests are answered, the next one hangs, and the process gets SIGKILL. Then
`orch spend` (which replays the outbox) and the ledger must hold what the server answered,
request for request (each answer has its own usage, so the sums name the answers), and the
run's files must be shown, and repaired, as what really happened: the cost that was paid, no
stage wave left ``running``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from ledger_rows import ledger_rows
from test_council_run import chair, kind_of, seat
from test_serve import daemon_process, xdg  # noqa: F401 - fixtures

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

pytestmark = pytest.mark.slow
ORCH = [sys.executable, "-m", "orchestrator"]
IN_PRICE, OUT_PRICE = 1000.0, 2000.0  # $ per million tokens: $0.001 and $0.002 a token
KINDS = ("review", "judge", "chair")


def usage_of(model: str, kind: str) -> dict[str, int]:
    """Distinct per model and stage, so a sum of rows says which answers it holds."""
    m = {"alpha": 1, "bravo": 2, "delta": 3, "solo": 4}[model]
    k = 1 + KINDS.index(kind) if kind in KINDS else 4
    return {"prompt_tokens": 1000 * k + 100 * m + 7, "completion_tokens": 10 * k + m}


def cost(tokens: tuple[int, int]) -> float:
    return (tokens[0] * IN_PRICE + tokens[1] * OUT_PRICE) / 1e6


def wait_for(check, timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def answered(server, model: str) -> list:
    """The requests of ``model`` the server answered (200), oldest first."""
    return [r for r in server.requests_for(model) if r.status == 200]


def settle(home: Path, run_id: str | None, server, models: list[str]) -> None:
    """Give the runner the moment a real crash would not wait for: until the ledger holds
    as many answers as the server gave (so a kill is after the durable write, as the
    product promises it is, before the next step), or 10 s. A product that writes rows only
    at a stage's end never gets there, and the checks after the kill fail."""
    want = sum(len(answered(server, m)) for m in models)
    of_run = ("run_id = ?", run_id) if run_id is not None else ()  # None: every row
    try:
        wait_for(lambda: sum(r["seq"] or 0 for r in ledger_rows(home, *of_run)) >= want,
                 timeout=10.0)
    except AssertionError:
        pass
    time.sleep(0.2)


def kill(proc) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL


def runner(argv: list[str], cwd: Path, env: dict[str, str] | None = None):
    """`orch ARGS` as the runner to be killed: an orch process of its own, forked warm
    (orchestrator/testing/warm.py). What is killed is orch mid-run; its interpreter's cold
    start is not the point (the daemon's cases run the real `orch serve` and client)."""
    from orchestrator.testing import warm

    return warm.start(argv, env=dict(env or os.environ), cwd=cwd)


def the_ledger_holds_what_was_answered(server, home: Path, run_id: str,
                                       models: list[str], by: str = "run_id") -> float:
    """`orch spend` (which replays any outbox), then: per model, the rows' token sums are
    the sums of the usages the server answered with, one billed answer per ``seq``; the
    total is their cost. Returns that cost."""
    spend = CliRunner().invoke(cli, ["spend", "--since", "all", "--json"])
    assert spend.exit_code == 0, spend.output
    rows = ledger_rows(home, f"{by} = ?", run_id)
    expected_total = 0.0
    for model in models:
        paid = [usage_of(model, kind_of(r.body) if model != "solo" else "bench")
                for r in answered(server, model)]
        tokens = (sum(u["prompt_tokens"] for u in paid),
                  sum(u["completion_tokens"] for u in paid))
        mine = [r for r in rows if r["model"] == f"scripted/{model}"]
        assert (sum(r["input_tokens"] for r in mine), sum(r["output_tokens"] for r in mine),
                sum(r["seq"] or 0 for r in mine)) == (*tokens, len(paid)), (model, mine)
        assert sum(r["cost_usd"] or 0 for r in mine) == pytest.approx(cost(tokens))
        expected_total += cost(tokens)
    assert sum(r["cost_usd"] or 0 for r in rows) == pytest.approx(expected_total)
    assert json.loads(spend.stdout)["total_cost_usd"] == pytest.approx(expected_total)
    return expected_total


# -- orch council run ------------------------------------------------------------------------

def billed(name: str, reply_fn, hang: str | None):
    """``reply_fn``'s answers with this model's usage per stage; ``hang``: the stage whose
    request never gets an answer."""
    def reply(body, n):
        kind = kind_of(body)
        if kind == hang:
            return Reply(hang=True)
        return replace(Reply.coerce(reply_fn(body, n)), usage=usage_of(name, kind))
    return reply


# stage -> (which seat hangs there, what the kill waits for: model -> requests arrived)
STAGES = {
    "review": ({"bravo": "review"}, {"alpha": 1, "bravo": 1}),
    "judge": ({"bravo": "judge"}, {"alpha": 2, "bravo": 2}),
    "chair": ({"delta": "chair"}, {"alpha": 2, "bravo": 2, "delta": 1}),
}


@pytest.mark.parametrize("stage", list(STAGES))
def test_kill_9_of_a_council_loses_no_billed_request_of_any_stage(
        stage, orch, scripted_server, orch_home, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # no daemon: the command runs it
    orch.provider(input_cost_per_mtok=IN_PRICE, output_cost_per_mtok=OUT_PRICE)
    hangs, until = STAGES[stage]
    for name in ("alpha", "bravo"):
        scripted_server.script(name, billed(name, seat(name), hangs.get(name)))
    scripted_server.script("delta", billed("delta", chair(), hangs.get("delta")))
    proc = runner(["council", "run", "-p", "Review this change to the query layer.",
                   "-m", "scripted/alpha,scripted/bravo", "--chair", "scripted/delta",
                   "--tools", "none", "--json"], cwd=tmp_path)
    try:
        wait_for(lambda: all(scripted_server.count(m) >= n for m, n in until.items()),
                 what=f"the {stage} stage's requests")
        (run_dir,) = (orch_home / "runs").glob("council-*")
        run_id = run_dir.name.removeprefix("council-")
        models = ["alpha", "bravo", "delta"]
        settle(orch_home, run_id, scripted_server, models)
        kill(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # what was answered: every request but the hanging one
    hung = next(iter(hangs))
    assert len(answered(scripted_server, hung)) == until[hung] - 1
    paid = the_ledger_holds_what_was_answered(scripted_server, orch_home, run_id, models)

    # the run as `orch status` and `orch runs` show it: interrupted, at the cost that was
    # paid, each stage's wave repaired (none left running), the files written back
    status = CliRunner().invoke(cli, ["status", run_id, "--json"])
    assert status.exit_code == 0, status.output
    doc = json.loads(status.stdout)
    assert doc["status"] == "interrupted" and doc["cost_usd"] == pytest.approx(paid)
    names = {"review": ["review"], "judge": ["review", "judge"],
             "chair": ["review", "judge", "chair-1"]}[stage]
    assert [s["name"] for s in doc["stages"]] == names
    assert [s["status"] for s in doc["stages"]] == ["complete"] * (len(names) - 1) + [
        "partial" if stage != "chair" else "aborted"]
    for entry in doc["stages"]:
        wave = json.loads((run_dir / "waves" / entry["wave_id"] / "wave.json").read_text())
        assert wave["status"] == entry["status"] != "running"
        assert wave["cost_usd"] == pytest.approx(entry["cost_usd"])
    assert sum(s["cost_usd"] for s in doc["stages"]) == pytest.approx(paid)
    on_disk = json.loads((run_dir / "run.json").read_text())
    assert (on_disk["status"], on_disk["cost_usd"]) == ("interrupted", doc["cost_usd"])
    listed = json.loads(CliRunner().invoke(cli, ["runs", "--json"]).stdout)
    (entry,) = [r for r in listed["runs"] if r["id"] == run_id]
    assert entry["status"] == "interrupted" and entry["cost_usd"] == pytest.approx(paid)
    the_seats_say_what_was_read(doc, stage)
    shown = CliRunner().invoke(cli, ["status", run_id])
    assert shown.exit_code == 0 and f"${paid:.4f}" in shown.output, shown.output


def the_seats_say_what_was_read(doc: dict, stage: str) -> None:
    """Killed in the reviews, no seat review was read: each seat says why. Killed later, the
    reviews were read (run.json is written as each stage begins): each seat is ``reviewed``."""
    why = {s["model"]: s["reason"] for s in doc["seats"]}
    if stage != "review":
        assert [s["status"] for s in doc["seats"]] == ["reviewed", "reviewed"], doc["seats"]
        return
    assert "but the run was killed before its review was read" in why["scripted/alpha"]
    assert "killed while it reviewed" in why["scripted/bravo"]


# -- orch council run through the daemon --------------------------------------------------

def the_council_is_shown_as_it_was_paid(run_dir: Path, run_id: str, stage: str,
                                        paid: float) -> None:
    """`orch status`, `orch runs` and run.json on disk (which opening it repairs, once):
    interrupted at the cost that was paid, the stages before ``stage`` complete and
    ``stage`` partial, no stage wave ``running``."""
    status = CliRunner().invoke(cli, ["status", run_id, "--json"])
    assert status.exit_code == 0, status.output
    doc = json.loads(status.stdout)
    assert doc["status"] == "interrupted" and doc["cost_usd"] == pytest.approx(paid)
    listed = json.loads(CliRunner().invoke(cli, ["runs", "--json"]).stdout)
    (entry,) = [r for r in listed["runs"] if r["id"] == run_id]
    assert entry["status"] == "interrupted" and entry["cost_usd"] == pytest.approx(paid)
    on_disk = json.loads((run_dir / "run.json").read_text())
    assert on_disk["status"] == "interrupted" and on_disk["cost_usd"] == pytest.approx(paid)
    names = {"review": ["review"], "judge": ["review", "judge"]}[stage]
    assert [(s["name"], s["status"]) for s in on_disk["stages"]] == [
        *((n, "complete") for n in names[:-1]), (names[-1], "partial")]
    for entry in on_disk["stages"]:
        wave = json.loads((run_dir / "waves" / entry["wave_id"] / "wave.json").read_text())
        assert wave["status"] == entry["status"] != "running"
        assert wave["cost_usd"] == pytest.approx(entry["cost_usd"])
    assert doc["stages"] == on_disk["stages"]


@pytest.mark.parametrize(("stage", "repair"), [
    ("review", "the next daemon's start-up"), ("review", "the client's message"),
    ("judge", "the next daemon's start-up"), ("judge", "the client's message")])
def test_kill_9_of_the_daemon_mid_council_loses_no_billed_request_and_the_run_is_repaired(
        stage, repair, orch, scripted_server, orch_home, tmp_path,
        xdg, daemon_process):  # noqa: F811
    """`orch council run` relayed to `orch serve`; the daemon gets SIGKILL while a stage
    has answers and a request hanging. The client says so in one line naming the council
    (not a stage's wave) and exits 1; the `orch status` it names, or the next daemon's
    start-up, repairs the council (its stage waves and run.json); the ledger holds every
    answer."""
    orch.provider(input_cost_per_mtok=IN_PRICE, output_cost_per_mtok=OUT_PRICE)
    hangs, until = STAGES[stage]
    for name in ("alpha", "bravo"):
        scripted_server.script(name, billed(name, seat(name), hangs.get(name)))
    scripted_server.script("delta", billed("delta", chair(), hangs.get("delta")))
    daemon = daemon_process()
    proc = subprocess.Popen(
        [*ORCH, "council", "run", "-p", "Review this change to the query layer.",
         "-m", "scripted/alpha,scripted/bravo", "--chair", "scripted/delta",
         "--tools", "none", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    models = ["alpha", "bravo", "delta"]
    try:
        wait_for(lambda: all(scripted_server.count(m) >= n for m, n in until.items()),
                 what=f"the {stage} stage's requests")
        (run_dir,) = (orch_home / "runs").glob("council-*")
        run_id = run_dir.name.removeprefix("council-")
        settle(orch_home, run_id, scripted_server, models)
        started = json.loads((run_dir / "run.json").read_text())
        assert (started["pid"], started["client_pid"]) == (daemon.pid, proc.pid)
        daemon.kill()
        daemon.wait()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # the client: exit 1, one line naming the council to look at, no traceback
    assert proc.returncode == 1, err
    assert out == "" and err.splitlines() == [
        f"orch: the orch daemon died; the run's files are as after a kill: "
        f"`orch status {run_id}`"], err
    stale = json.loads((run_dir / "run.json").read_text())
    assert stale["status"] == "running"  # as the kill left it: behind the money (below)
    hung = next(iter(hangs))
    assert len(answered(scripted_server, hung)) == until[hung] - 1

    if repair == "the next daemon's start-up":
        daemon_process()  # repairs what the dead one left, before anyone opens it
        wait_for(lambda: json.loads((run_dir / "run.json").read_text())["status"]
                 != "running", what="the council's repair on start-up")
        assert json.loads((run_dir / "run.json").read_text())["repaired"] is True
    else:  # the command the client named, as the user runs it
        named = err.split("`")[1].split()
        shown = subprocess.run([*ORCH, *named[1:]], capture_output=True, text=True,
                               cwd=tmp_path, timeout=120)
        assert shown.returncode == 0, shown.stderr
        assert "interrupted" in shown.stdout and "Traceback" not in shown.stderr
    paid = the_ledger_holds_what_was_answered(scripted_server, orch_home, run_id, models)
    assert stale["cost_usd"] < paid  # the stages before the one killed, at most
    the_council_is_shown_as_it_was_paid(run_dir, run_id, stage, paid)


# -- orch mcp ---------------------------------------------------------------------------------

def test_kill_9_of_orch_mcp_mid_fanout_loses_no_billed_request_and_status_repairs_the_wave(
        orch, scripted_server, orch_home, tmp_path, monkeypatch):
    """The real `orch mcp` over stdio (as tests/test_mcp.py makes it), its `fanout` tool
    called with a model that answers (a tool call) and then hangs, and one that answers:
    SIGKILL `orch mcp` while the call is in flight."""
    import anyio

    mcp = pytest.importorskip("mcp")
    from mcp.client.stdio import StdioServerParameters, stdio_client

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    orch.provider(input_cost_per_mtok=IN_PRICE, output_cost_per_mtok=OUT_PRICE)
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "notes.txt").write_text("some notes\n")
    scripted_server.script("solo", Reply(tool_calls=[{"name": "list", "arguments": {}}],
                                         usage=usage_of("solo", "bench")), Reply(hang=True))
    scripted_server.script("alpha", Reply(text="alpha's answer",
                                          usage=usage_of("alpha", "review")))
    pidfile = tmp_path / "mcp.pid"
    env = dict(os.environ, ORCH_HOME=str(orch_home))
    params = StdioServerParameters(
        command="bash", args=["-c", f'echo $$ > "{pidfile}"; exec "{sys.executable}" -m '
                                    'orchestrator mcp'], env=env, cwd=str(project))

    async def session_killed_mid_call() -> None:
        with anyio.fail_after(90), (tmp_path / "mcp-stderr.log").open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with mcp.ClientSession(read, write) as session:
                    await session.initialize()
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(session.call_tool, "fanout", {
                            "models": ["scripted/solo", "scripted/alpha"],
                            "prompt": "List the project's files, then say what is there."})
                        while not (scripted_server.count("solo") >= 2
                                   and answered(scripted_server, "alpha")):
                            await anyio.sleep(0.05)
                        await anyio.to_thread.run_sync(
                            settle, orch_home, None, scripted_server, ["solo", "alpha"])
                        os.kill(int(pidfile.read_text()), signal.SIGKILL)
                        await anyio.sleep(0.5)
                        tg.cancel_scope.cancel()

    try:
        anyio.run(session_killed_mid_call)
    except Exception as exc:  # the server died under the session: its transport says so
        assert not isinstance(exc, TimeoutError), exc
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # it is dead (SIGKILL, reaped by the client)
    (wave,) = [p.parent.name for p in (orch_home / "runs").glob("*/wave.json")]
    stale = json.loads((orch_home / "runs" / wave / "wave.json").read_text())
    assert stale["status"] == "running"  # as the kill left it
    assert len(answered(scripted_server, "solo")) == 1
    paid = the_ledger_holds_what_was_answered(scripted_server, orch_home, wave,
                                              ["solo", "alpha"], by="wave_id")

    status = CliRunner().invoke(cli, ["status", wave, "--json"])
    assert status.exit_code == 0, status.output
    doc = json.loads(status.stdout)
    legs = {leg["model"]: leg for leg in doc["legs"]}
    assert (legs["scripted/solo"]["status"], legs["scripted/solo"]["billed"]) == ("aborted", 1)
    assert legs["scripted/alpha"]["status"] == "complete"
    assert legs["scripted/solo"]["usage"]["input_tokens"] == \
        usage_of("solo", "bench")["prompt_tokens"]
    assert doc["status"] == "partial" and doc["cost_usd"] == pytest.approx(paid)
    on_disk = json.loads((orch_home / "runs" / wave / "wave.json").read_text())
    assert (on_disk["status"], on_disk["cost_usd"]) == ("partial", doc["cost_usd"])


@pytest.mark.parametrize("stage", ["review", "judge"])
def test_kill_9_of_orch_mcp_mid_council_run_loses_no_billed_request_and_the_run_is_repaired(
        stage, orch, scripted_server, orch_home, tmp_path, monkeypatch):
    """The real `orch mcp` over stdio, its `council_run` tool called; SIGKILL `orch mcp`
    while a stage has answers and a request hanging. Then `orch spend`, `orch status` and
    `orch runs`, as for a killed `orch council run`."""
    import anyio

    mcp = pytest.importorskip("mcp")
    from mcp.client.stdio import StdioServerParameters, stdio_client

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    orch.provider(input_cost_per_mtok=IN_PRICE, output_cost_per_mtok=OUT_PRICE)
    hangs, until = STAGES[stage]
    for name in ("alpha", "bravo"):
        scripted_server.script(name, billed(name, seat(name), hangs.get(name)))
    scripted_server.script("delta", billed("delta", chair(), hangs.get("delta")))
    models = ["alpha", "bravo", "delta"]
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    pidfile = tmp_path / "mcp.pid"
    env = dict(os.environ, ORCH_HOME=str(orch_home))
    params = StdioServerParameters(
        command="bash", args=["-c", f'echo $$ > "{pidfile}"; exec "{sys.executable}" -m '
                                    'orchestrator mcp'], env=env, cwd=str(project))

    async def session_killed_mid_call() -> None:
        with anyio.fail_after(90), (tmp_path / "mcp-stderr.log").open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with mcp.ClientSession(read, write) as session:
                    await session.initialize()
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(session.call_tool, "council_run", {
                            "prompt": "Review this change to the query layer.",
                            "models": ["scripted/alpha", "scripted/bravo"],
                            "chair": "scripted/delta", "tools": "none"})
                        while not all(scripted_server.count(m) >= n
                                      for m, n in until.items()):
                            await anyio.sleep(0.05)
                        await anyio.to_thread.run_sync(
                            settle, orch_home, None, scripted_server, models)
                        os.kill(int(pidfile.read_text()), signal.SIGKILL)
                        await anyio.sleep(0.5)
                        tg.cancel_scope.cancel()

    try:
        anyio.run(session_killed_mid_call)
    except Exception as exc:  # the server died under the session: its transport says so
        assert not isinstance(exc, TimeoutError), exc
    with pytest.raises(ProcessLookupError):
        os.kill(int(pidfile.read_text()), 0)  # it is dead (SIGKILL, reaped by the client)
    (run_dir,) = (orch_home / "runs").glob("council-*")
    run_id = run_dir.name.removeprefix("council-")
    stale = json.loads((run_dir / "run.json").read_text())
    assert stale["status"] == "running"  # as the kill left it: behind the money (below)
    hung = next(iter(hangs))
    assert len(answered(scripted_server, hung)) == until[hung] - 1
    paid = the_ledger_holds_what_was_answered(scripted_server, orch_home, run_id, models)
    assert stale["cost_usd"] < paid  # the stages before the one killed, at most
    the_council_is_shown_as_it_was_paid(run_dir, run_id, stage, paid)
    doc = json.loads(CliRunner().invoke(cli, ["status", run_id, "--json"]).stdout)
    the_seats_say_what_was_read(doc, stage)


# -- orch bench -------------------------------------------------------------------------------

def bench_reply(hang: set[str]):
    """t1 answers (CODE-t1, the solo usage); a task in ``hang`` never gets an answer."""
    def reply(body, n):
        import re

        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        task = re.search(r"Task (t\d+)", prompt).group(1)
        if task in hang:
            return Reply(hang=True)
        return Reply(text=f"CODE-{task}", usage=usage_of("solo", "bench"))
    return reply


def test_kill_9_of_a_bench_keeps_the_answered_trial_paid_once_and_resume_runs_only_the_rest(
        orch, scripted_server, orch_home, tmp_path, monkeypatch):
    """Two model trials (t1 answers, t2 hangs), one at a time: SIGKILL `orch bench`. The
    answered trial is in the ledger and in the results file (written as each trial is
    graded); `orch status` shows the bench interrupted at what it paid; a resume says t2 was
    in flight at the kill (may be billed) and sends nothing; `--retry-excluded` sends t2
    only."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    orch.provider(input_cost_per_mtok=IN_PRICE, output_cost_per_mtok=OUT_PRICE)
    scripted_server.script("solo", bench_reply({"t2"}))
    cases = tmp_path / "cases"
    cases.mkdir()
    for task in ("t1", "t2"):
        (cases / f"{task}.json").write_text(json.dumps(
            {"id": task, "task": f"Task {task}: reply with CODE-{task}.",
             "expect": {"contains": [f"CODE-{task}"]}, "solution": f"CODE-{task}"}))
    config = tmp_path / "bench.toml"
    config.write_text('[bench]\ncases = "cases"\ntrials = 1\njobs = 1\n\n[[contestants]]\n'
                      'name = "solo"\nmodel = "scripted/solo"\ntools = "none"\n')
    out = tmp_path / "results.json"
    env = dict(os.environ, ORCH_HOME=str(orch_home))
    proc = runner(["bench", "--config", str(config), "--yes", "--out", str(out), "-q"],
                  cwd=tmp_path, env=env)
    try:
        wait_for(lambda: scripted_server.count("solo") >= 2, what="t2 on the wire")
        wait_for(lambda: out.is_file() and json.loads(out.read_text())["trials"],
                 timeout=15, what="t1 graded into the results file")
        bench_id = json.loads(out.read_text())["bench_id"]
        settle(orch_home, bench_id, scripted_server, ["solo"])
        kill(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert len(answered(scripted_server, "solo")) == 1
    paid = the_ledger_holds_what_was_answered(scripted_server, orch_home, bench_id, ["solo"])
    assert paid == pytest.approx(cost((usage_of("solo", "bench")["prompt_tokens"],
                                       usage_of("solo", "bench")["completion_tokens"])))

    # shown as what happened: interrupted, t1 graded and paid, no wave left running
    status = CliRunner().invoke(cli, ["status", bench_id, "--json"])
    assert status.exit_code == 0, status.output
    doc = json.loads(status.stdout)
    assert doc["status"] == "interrupted"
    assert [(t["task"], t["passed"], t["cost_usd"]) for t in doc["trials"]] == [
        ("t1", True, pytest.approx(paid))]
    listed = json.loads(CliRunner().invoke(cli, ["runs", "--json"]).stdout)
    (entry,) = [r for r in listed["runs"] if r["id"] == bench_id]
    assert entry["status"] == "interrupted" and entry["cost_usd"] == pytest.approx(paid)
    assert [w["status"] for w in entry["waves"]] == ["partial"]  # repaired, not running
    shown = CliRunner().invoke(cli, ["bench", "show", str(out)])
    assert shown.exit_code == 0 and "t1" in shown.output, shown.output

    # a plain resume never sends t2 again: its request was in flight at the kill and may
    # have been billed; the results say so, at most what it can have cost (issue 40)
    sent_before = scripted_server.count("solo")
    plain = subprocess.run([*ORCH, "bench", "resume", str(out), "--yes", "-q"],
                           capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert plain.returncode == 2 and "in flight at the kill" in plain.stderr, plain.stderr
    assert scripted_server.count("solo") == sent_before, plain.stderr
    (t2,) = [t for t in json.loads(out.read_text())["trials"] if t["task"] == "t2"]
    assert not t2["passed"] and "in flight" in t2["excluded"], t2

    # --retry-excluded sends it; killed in turn (t2 hangs again), t1 stays graded once
    again = runner(["bench", "resume", str(out), "--yes", "-q", "--retry-excluded"],
                   cwd=tmp_path, env=env)
    try:
        wait_for(lambda: scripted_server.count("solo") > sent_before, what="t2 resent")
        time.sleep(0.2)
        kill(again)
    finally:
        if again.poll() is None:
            again.kill()
            again.communicate()
    assert [(t["task"], t["passed"]) for t in json.loads(out.read_text())["trials"]
            if t["task"] == "t1"] == [("t1", True)]
    assert "Task t2" in json.dumps(scripted_server.requests_for("solo")[-1].body)

    # in flight at this kill too: the next resume says so first, even asked to retry it
    sent_before = scripted_server.count("solo")
    said = subprocess.run([*ORCH, "bench", "resume", str(out), "--yes", "-q",
                           "--retry-excluded"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert said.returncode == 2 and "in flight at the kill" in said.stderr, said.stderr
    assert scripted_server.count("solo") == sent_before

    # the last resume pays for t2 only: t1's answer is not bought again
    scripted_server.script("solo", bench_reply(set()))  # t2 answers now (count restarts)
    sent_before = scripted_server.count("solo")
    resumed = subprocess.run([*ORCH, "bench", "resume", str(out), "--yes", "-q",
                              "--retry-excluded"],
                             capture_output=True, text=True, cwd=tmp_path, env=env,
                             timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    sent = scripted_server.requests_for("solo")[sent_before:]
    assert len(sent) == 1 and "Task t2" in json.dumps(sent[0].body)
    final = json.loads(out.read_text())
    assert "running" not in final and [(t["task"], t["passed"]) for t in final["trials"]] \
        == [("t1", True), ("t2", True)]
    rows = ledger_rows(orch_home, "run_id = ?", bench_id)
    assert sum(r["seq"] or 0 for r in rows) == len(answered(scripted_server, "solo")) == 2


# -- a deliberation and a bench through the daemon ----------------------------------------

def deliberating(name: str, hang_in_round_2: bool):
    """Round 1: an answer; round 2: a kept answer, or (``hang_in_round_2``) no answer ever.
    Each answer has this model's usage, so the ledger's sums name the answers."""
    def reply(body, n):
        if n >= 1 and hang_in_round_2:
            return Reply(hang=True)
        text = f"{name} says: use an OrderedDict." if n == 0 else "Mine stands."
        return Reply(text=text, usage=usage_of(name, kind_of(body)))
    return reply


def killed_through_the_daemon(daemon, argv: list[str], cwd: Path, ready, settled):
    """Run ``orch argv`` relayed to ``daemon``; when ``ready()``, ``settled()`` then SIGKILL
    the daemon. The client's (returncode, stdout, stderr)."""
    proc = subprocess.Popen([*ORCH, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=cwd)
    try:
        wait_for(ready, what="the requests to kill the daemon under")
        settled()
        daemon.kill()
        daemon.wait()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def repair_by(repair: str, err: str, cwd: Path, daemon_process, check) -> None:  # noqa: F811
    """The next daemon's start-up (until ``check()``), or the command the client named, as
    the user runs it: exit 0, ``interrupted`` shown, no traceback."""
    if repair == "the next daemon's start-up":
        daemon_process()
        wait_for(check, what="the repair on start-up")
        return
    named = err.split("`")[1].split()
    shown = subprocess.run([*ORCH, *named[1:]], capture_output=True, text=True, cwd=cwd,
                           timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "interrupted" in shown.stdout and "Traceback" not in shown.stderr
    assert check()


REPAIRS = ["the next daemon's start-up", "the client's message"]


def test_kill_9_of_a_deliberation_in_round_2_is_listed_and_repaired_at_what_it_paid(
        orch, scripted_server, orch_home, tmp_path, monkeypatch):
    """`orch fanout --rounds 3` run in-process, SIGKILL in round 2: the run is not a folder
    nothing names (its wave.json was written at its start); `orch runs` lists it and
    `orch status` shows it interrupted at what both rounds were billed, written back."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # no daemon: the command runs it
    orch.provider(input_cost_per_mtok=IN_PRICE, output_cost_per_mtok=OUT_PRICE)
    scripted_server.script("alpha", deliberating("alpha", False))
    scripted_server.script("bravo", deliberating("bravo", True))
    models = ["alpha", "bravo"]
    proc = runner(["fanout", "-m", "scripted/alpha,scripted/bravo", "--rounds", "3", "-p",
                   "How do I build an LRU cache?", "--tools", "none", "--json"], cwd=tmp_path)
    try:
        wait_for(lambda: len(answered(scripted_server, "alpha")) >= 2
                 and scripted_server.count("bravo") >= 2, what="round 2's requests")
        settle(orch_home, None, scripted_server, models)
        kill(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    (run_dir,) = [p.parent for p in (orch_home / "runs").glob("*/wave.json")]
    run_id = run_dir.name
    paid = the_ledger_holds_what_was_answered(scripted_server, orch_home, run_id, models)
    listed = json.loads(CliRunner().invoke(cli, ["runs", "--json"]).stdout)
    (entry,) = [r for r in listed["runs"] if r["id"] == run_id]
    assert entry["status"] == "interrupted" and entry["cost_usd"] == pytest.approx(paid)
    shown = CliRunner().invoke(cli, ["status", run_id])
    assert shown.exit_code == 0 and "interrupted" in shown.output, shown.output
    on_disk = json.loads((run_dir / "wave.json").read_text())
    assert (on_disk["status"], on_disk["cost_usd"]) == ("interrupted", pytest.approx(paid))
    assert [w["status"] for w in on_disk["round_waves"]] == ["complete", "partial"]


@pytest.mark.parametrize("repair", REPAIRS)
def test_kill_9_of_the_daemon_mid_deliberation_names_the_run_and_it_is_repaired(
        repair, orch, scripted_server, orch_home, tmp_path, xdg, daemon_process):  # noqa: F811
    """`orch fanout --rounds 3` relayed to `orch serve`; SIGKILL the daemon in round 2
    (alpha answered it, bravo's request hangs). The client names the deliberation, not a
    round's wave; its wave.json (written `running` at its start) is repaired by the named
    `orch status` or the next daemon's start-up: interrupted, at what both rounds paid."""
    orch.provider(input_cost_per_mtok=IN_PRICE, output_cost_per_mtok=OUT_PRICE)
    scripted_server.script("alpha", deliberating("alpha", False))
    scripted_server.script("bravo", deliberating("bravo", True))
    models = ["alpha", "bravo"]
    runs = orch_home / "runs"

    def started() -> Path:
        (run_dir,) = [p.parent for p in runs.glob("*/wave.json")]
        return run_dir

    daemon = daemon_process()
    code, out, err = killed_through_the_daemon(
        daemon, ["fanout", "-m", "scripted/alpha,scripted/bravo", "--rounds", "3", "-p",
                 "How do I build an LRU cache?", "--tools", "none", "--json"], tmp_path,
        lambda: len(answered(scripted_server, "alpha")) >= 2
        and scripted_server.count("bravo") >= 2,
        lambda: settle(orch_home, None, scripted_server, models))
    run_dir = started()
    run_id = run_dir.name
    assert code == 1 and out == "" and err.splitlines() == [
        f"orch: the orch daemon died; the run's files are as after a kill: "
        f"`orch status {run_id}`"], err
    stale = json.loads((run_dir / "wave.json").read_text())
    assert (stale["kind"], stale["status"], stale["cost_usd"]) == ("deliberation", "running", 0)
    assert len(answered(scripted_server, "bravo")) == 1  # round 2's hangs

    def on_disk() -> dict:
        return json.loads((run_dir / "wave.json").read_text())

    repair_by(repair, err, tmp_path, daemon_process, lambda: on_disk()["status"] != "running")
    paid = the_ledger_holds_what_was_answered(scripted_server, orch_home, run_id, models)
    doc = on_disk()
    assert (doc["status"], doc["exit_code"], doc["cost_usd"]) == (
        "interrupted", 1, pytest.approx(paid))
    assert [(w["wave_id"].removeprefix(run_id), w["status"]) for w in doc["round_waves"]] \
        == [("-round-1", "complete"), ("-round-2", "partial")]
    legs = {(leg["wave_id"].removeprefix(run_id), leg["model"]): leg["status"]
            for leg in doc["legs"]}
    assert legs == {("-round-1", "scripted/alpha"): "complete",
                    ("-round-1", "scripted/bravo"): "complete",
                    ("-round-2", "scripted/alpha"): "complete",
                    ("-round-2", "scripted/bravo"): "aborted"}
    for entry in doc["round_waves"]:  # each round's own wave.json repaired, not running
        wave = json.loads((run_dir / "rounds" / entry["wave_id"] / "wave.json").read_text())
        assert wave["status"] == entry["status"] and wave["cost_usd"] == entry["cost_usd"]
    status = CliRunner().invoke(cli, ["status", run_id, "--json"])
    assert status.exit_code == 0 and json.loads(status.stdout) == doc, status.output
    listed = json.loads(CliRunner().invoke(cli, ["runs", "--json"]).stdout)
    (entry,) = [r for r in listed["runs"] if r["id"] == run_id]
    assert entry["status"] == "interrupted" and entry["cost_usd"] == pytest.approx(paid)


# trial kind -> (its contestant in bench.toml, the models, its record in the runs folder)
BENCH_TRIALS = {
    "deliberation": ('kind = "fanout"\nmodels = ["scripted/alpha", "scripted/bravo"]\n'
                     'rounds = 3\n', ["alpha", "bravo"], "{bench}-*/wave.json"),
    "council": ('kind = "council"\nmodels = ["scripted/alpha", "scripted/bravo"]\n'
                'chair = "scripted/delta"\n', ["alpha", "bravo", "delta"],
                "council-{bench}-*/run.json"),
}


@pytest.mark.parametrize("repair", REPAIRS)
@pytest.mark.parametrize("trial", list(BENCH_TRIALS))
def test_kill_9_of_the_daemon_mid_bench_names_the_bench_and_shows_what_it_paid(
        trial, repair, orch, scripted_server, orch_home, tmp_path,
        xdg, daemon_process):  # noqa: F811
    """`orch bench` relayed to `orch serve`, its one trial a deliberation or a council (a
    run inside the bench's run, which announces its own id); SIGKILL the daemon in the
    deliberation's round 2, or at the council's judges. The client names the bench (the
    first run the job announced, not the trial's run nor one of its waves); `orch status`
    of it, or the next daemon's start-up, shows it interrupted at what the trial was
    billed, though no trial was graded, and names `orch bench resume`."""
    orch.provider(input_cost_per_mtok=IN_PRICE, output_cost_per_mtok=OUT_PRICE)
    contestant, models, record = BENCH_TRIALS[trial]
    if trial == "deliberation":
        scripted_server.script("alpha", deliberating("alpha", False))
        scripted_server.script("bravo", deliberating("bravo", True))
        until = {"alpha": 2, "bravo": 2}
    else:
        hangs, until = STAGES["judge"]
        for name in ("alpha", "bravo"):
            scripted_server.script(name, billed(name, seat(name), hangs.get(name)))
        scripted_server.script("delta", billed("delta", chair(), None))
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "t1.json").write_text(json.dumps(
        {"id": "t1", "task": "Task t1: how do I build an LRU cache?",
         "expect": {"contains": ["OrderedDict"]}, "solution": "OrderedDict"}))
    config = tmp_path / "bench.toml"
    config.write_text('[bench]\ncases = "cases"\ntrials = 1\njobs = 1\n\n[[contestants]]\n'
                      f'name = "{trial}"\ntools = "none"\n{contestant}')
    out = tmp_path / "results.json"
    daemon = daemon_process()
    code, stdout, err = killed_through_the_daemon(
        daemon, ["bench", "--config", str(config), "--yes", "--out", str(out), "-q"],
        tmp_path,
        lambda: all(scripted_server.count(m) >= n for m, n in until.items())
        and len(answered(scripted_server, "alpha")) >= until["alpha"],
        lambda: settle(orch_home, None, scripted_server, models))
    bench_id = json.loads(out.read_text())["bench_id"]
    died = [line for line in err.splitlines() if "daemon" in line]  # after the estimate
    assert code == 1 and "Traceback" not in err and died == err.splitlines()[-1:] == [
        f"orch: the orch daemon died; the run's files are as after a kill: "
        f"`orch status {bench_id}`"], err
    assert json.loads(out.read_text())["trials"] == []  # killed before it graded one
    (path,) = (orch_home / "runs").glob(record.format(bench=bench_id))

    def trial_doc() -> dict:
        return json.loads(path.read_text())

    assert trial_doc()["status"] == "running"
    repair_by(repair, err, tmp_path, daemon_process,
              lambda: trial_doc()["status"] == "interrupted")
    ledger_run = bench_id if trial == "deliberation" else \
        path.parent.name.removeprefix("council-")  # a council trial's rows: its own run id
    paid = the_ledger_holds_what_was_answered(scripted_server, orch_home, ledger_run, models)
    status = CliRunner().invoke(cli, ["status", bench_id, "--json"])
    assert status.exit_code == 0, status.output
    doc = json.loads(status.stdout)
    assert (doc["status"], doc["cost_usd"]) == ("interrupted", pytest.approx(paid))
    assert [(w["id"], w["status"]) for w in doc["waves"]] == [(path.parent.name,
                                                              "interrupted")]
    assert trial_doc()["cost_usd"] == pytest.approx(paid)
    listed = json.loads(CliRunner().invoke(cli, ["runs", "--json"]).stdout)
    (entry,) = [r for r in listed["runs"] if r["id"] == bench_id]
    assert entry["status"] == "interrupted" and entry["cost_usd"] == pytest.approx(paid)
    shown = CliRunner().invoke(cli, ["status", bench_id])
    assert f"${paid:.4f}" in shown.output and f"orch bench resume {out}" in shown.output, \
        shown.output
