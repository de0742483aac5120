"""`kill -9` at every await point of a 3-step tool-using leg, in-process and of the daemon.

The runner (an `orch fanout` process, or the `orch serve` daemon that runs it) is killed
before the first answer, after each answer, in the middle of a tool, and in the middle of
the chair. Then `orch spend` and `orch status`: the ledger holds what the scripted server
answered, request for request (a leg's row carries ``seq``, the answers it holds), and the
wave's files are repaired to the true status and cost. Before per-request rows, a leg killed
after two paid answers had no row at all and `orch status` showed it `aborted $0`.

The tool in the middle of which the runner dies is ``read_pipe`` of an installed test plugin:
it reads a named pipe the test holds open, so it blocks there. orch's own workspace reads
refuse a pipe before opening it (only regular files are read), so no built-in tool can wait.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_plugins_loading import site  # noqa: F401 - its fixture
from test_serve import daemon_process, sock, wait_for, xdg  # noqa: F401 - fixtures

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

pytestmark = pytest.mark.slow
ORCH = [sys.executable, "-m", "orchestrator"]
IN_PRICE, OUT_PRICE = 1000.0, 2000.0  # $ per million tokens: $0.001 and $0.002 a token


def usage(n: int) -> dict[str, int]:
    """The usage of the leg's n-th answer (1-based): distinct, so sums name the answers."""
    return {"prompt_tokens": 100 * n + 1, "completion_tokens": 10 * n + 2}


def counted(text: str, n: int) -> Reply:
    return Reply(tool_calls=[{"name": "word_count", "arguments": {"text": text}}],
                 usage=usage(n))


HANG = Reply(hang=True)
PIPE = Reply(tool_calls=[{"name": "read_pipe", "arguments": {"path": "pipe"}}],
             usage=usage(2))
ANSWER = Reply(text="three words here", usage=usage(3))
CHAIR = {"prompt_tokens": 1000, "completion_tokens": 50}

# point -> (the leg's script, the chair's script, what the kill waits for)
POINTS = {
    "before the first answer": ([HANG], None, ("tool", 1)),
    "after answer 1": ([counted("a b", 1), HANG], None, ("tool", 2)),
    "mid-tool": ([counted("a b", 1), PIPE], None, "pipe"),
    "after answer 2": ([counted("a b", 1), counted("c d", 2), HANG], None, ("tool", 3)),
    "mid-chair": ([counted("a b", 1), counted("c d", 2), ANSWER], [HANG], ("chair", 1)),
}


# A tool that blocks, as a slow tool does: it opens the pipe itself (a test plugin; orch's
# workspace rules would refuse a pipe) and reads until the writer closes it.
PIPE_TOOL = """
import os
from orchestrator.hookspecs import hookimpl
from orchestrator.tools import Tool

def pipe_tool(leg):
    def read_pipe(path: str) -> str:
        \"\"\"Read a named pipe in the workspace to its end.

        Args:
            path: The pipe, relative to the workspace root.
        \"\"\"
        with open(os.path.join(leg.workspace, path), encoding="utf-8") as fh:
            return fh.read()

    return Tool.from_function(read_pipe)

@hookimpl
def register_tools(leg):
    return [pipe_tool(leg)]
"""


def answered(server, model: str) -> list[int]:
    """1-based numbers of the requests of ``model`` the server answered."""
    return [n for n, r in enumerate(server.requests_for(model), 1) if r.status == 200]


def reader_waits(fifo: Path) -> int | None:
    """A writer's fd once the tool has the pipe open for reading (it then blocks on read)."""
    try:
        return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return None


@pytest.fixture
def durable(orch, scripted_server, orch_home, tmp_path, site, monkeypatch):  # noqa: F811
    """The scripted provider with prices, the word_count tool on, the read_pipe tool
    installed (for the runner, the fanout or the daemon, on PYTHONPATH), a workspace with a
    pipe."""
    orch.provider(input_cost_per_mtok=IN_PRICE, output_cost_per_mtok=OUT_PRICE)
    orch.config(plugin_config={"wordcount": {"tool": True}})
    site.install("orch-test-pipe", "1.0", {"pipetool": PIPE_TOOL})
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(site.path), os.environ.get("PYTHONPATH")) if p))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.mkfifo(workspace / "pipe")
    return workspace


class Client:
    """`orch ARGS` as a user runs it (through the daemon, when one is up)."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen([*ORCH, *argv], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.pid = self.proc.pid

    def poll(self):
        return self.proc.poll()

    def kill(self) -> None:
        self.proc.kill()

    def wait(self, timeout: float) -> None:
        self.proc.communicate(timeout=timeout)


class Runner:
    """`orch ARGS` as the runner in a process of its own, forked warm (testing/warm.py): what
    is killed is an orch process mid-wave; its interpreter's cold start is not the point."""

    def __init__(self, argv: list[str]) -> None:
        from orchestrator.testing import warm

        self.proc = warm.start(argv, env=dict(os.environ))
        self.pid = self.proc.pid

    def poll(self):
        return self.proc.poll()

    def kill(self) -> None:
        self.proc.kill()

    def wait(self, timeout: float) -> None:
        self.proc.wait(timeout)


def kill_at(point: str, server, workspace: Path, home: Path, runner_pid,
            start=Client) -> tuple[str, list]:
    """Start the wave, wait for ``point``, SIGKILL the runner; the wave id and held fds."""
    leg, chair, until = POINTS[point]
    server.script("tool", *leg)
    argv = ["fanout", "-m", "scripted/tool", "-p", "count the words",
            "--workspace", str(workspace), "--max-steps", "3", "--json"]
    if chair:
        server.script("chair", *chair, Reply(hang=True))
        argv += ["--chair", "scripted/chair"]
    proc = start(argv)
    held = []
    try:
        if until == "pipe":
            def tool_reads() -> bool:
                fd = reader_waits(workspace / "pipe")
                if fd is not None:
                    held.append(fd)  # kept open: the tool stays blocked in its read
                return fd is not None

            wait_for(tool_reads, what="the tool on the pipe")
        else:
            model, count = until
            wait_for(lambda: server.count(model) >= count, what=f"{model} request {count}")
        time.sleep(0.2)  # the runner is now parked at that await
        os.kill(runner_pid(proc), 9)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
    (wave,) = [p.parent.name for p in (home / "runs").glob("*/wave.json")]
    return wave, held


def check_the_record(point: str, server, home: Path, wave: str) -> None:
    from orchestrator.ledger.spend import Ledger

    spend = CliRunner().invoke(cli, ["spend", "--since", "all", "--json"])
    assert spend.exit_code == 0, spend.output
    rows = {r["leg_id"]: r for r in Ledger().rows(wave_id=wave)}
    expected_cost = 0.0
    for model, leg_id in (("tool", f"{wave}-1"), ("chair", f"{wave}-chair")):
        paid = answered(server, model)
        if model == "chair":
            tokens = (CHAIR["prompt_tokens"], CHAIR["completion_tokens"]) if paid else (0, 0)
        else:
            tokens = (sum(usage(n)["prompt_tokens"] for n in paid),
                      sum(usage(n)["completion_tokens"] for n in paid))
        cost = (tokens[0] * IN_PRICE + tokens[1] * OUT_PRICE) / 1e6
        expected_cost += cost
        if not paid:
            assert leg_id not in rows or rows[leg_id]["input_tokens"] == 0, (point, rows)
            continue
        row = rows[leg_id]  # request for request: the row holds every answer, once
        assert (row["seq"], row["input_tokens"], row["output_tokens"]) == (
            len(paid), *tokens), (point, row)
        assert row["cost_usd"] == pytest.approx(cost)
    assert json.loads(spend.stdout)["total_cost_usd"] == pytest.approx(expected_cost)

    status = CliRunner().invoke(cli, ["status", wave, "--json"])
    assert status.exit_code == 0, status.output
    doc = json.loads(status.stdout)
    leg = doc["legs"][0]
    paid = answered(server, "tool")
    assert leg["usage"]["input_tokens"] == sum(usage(n)["prompt_tokens"] for n in paid)
    assert leg["cost_usd"] == pytest.approx(rows[leg["leg_id"]]["cost_usd"] if paid else 0.0)
    assert leg["billed"] == len(paid)
    if point == "mid-chair":
        assert leg["status"] == "complete" and doc["chair"]["status"] == "aborted"
        assert doc["status"] == "partial"
    else:
        assert leg["status"] == "aborted" and doc["status"] == "aborted"
    assert doc["cost_usd"] == pytest.approx(expected_cost)
    # the files themselves were repaired, atomically, once
    on_disk = json.loads((home / "runs" / wave / "wave.json").read_text())
    assert on_disk["status"] == doc["status"] and on_disk["cost_usd"] == doc["cost_usd"]
    meta = json.loads((home / "runs" / f"{wave}-1" / "metadata.json").read_text())
    assert (meta["status"], meta["billed"]) == (leg["status"], len(paid))
    listed = CliRunner().invoke(cli, ["runs", "--json"])
    (entry,) = [r for r in json.loads(listed.stdout)["runs"] if r["id"] == wave]
    assert entry["cost_usd"] == pytest.approx(expected_cost)


@pytest.mark.parametrize("point", list(POINTS))
def test_kill_9_of_the_fanout_process_loses_no_billed_request(
        point, durable, scripted_server, orch_home, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # no daemon here: the fanout runs
    wave, held = kill_at(point, scripted_server, durable, orch_home, lambda proc: proc.pid,
                         start=Runner)
    try:
        check_the_record(point, scripted_server, orch_home, wave)
    finally:
        for fd in held:
            os.close(fd)


@pytest.mark.parametrize("point", ["after answer 1", "mid-tool", "mid-chair"])
def test_kill_9_of_the_daemon_loses_no_billed_request_and_its_restart_repairs_the_wave(
        point, durable, scripted_server, orch_home, xdg, daemon_process):  # noqa: F811
    daemon = daemon_process()
    wave, held = kill_at(point, scripted_server, durable, orch_home, lambda proc: daemon.pid)
    daemon.wait()
    try:
        stale = json.loads((orch_home / "runs" / wave / "wave.json").read_text())
        assert stale["status"] == "running"  # as the kill left it
        daemon_process()  # the next daemon repairs what the dead one left, on start-up
        wait_for(lambda: json.loads((orch_home / "runs" / wave / "wave.json").read_text())
                 ["status"] != "running", what="the repair on start-up")
        check_the_record(point, scripted_server, orch_home, wave)
    finally:
        for fd in held:
            os.close(fd)


def test_a_full_disk_at_the_end_leaves_paid_legs_repaired_from_the_outbox(
        orch, scripted_server, orch_home, monkeypatch):
    """The issue's case: the ledger cannot be reached, and the disk is full once the legs
    answered — their final metadata.json and wave.json are never written, the rows wait in
    the outbox. The process exits; `orch status` must not show the paid legs `aborted $0`."""
    from orchestrator import store

    orch.provider(input_cost_per_mtok=IN_PRICE, output_cost_per_mtok=OUT_PRICE)
    for n in range(1, 5):
        scripted_server.script(f"m{n}", Reply(text="paid", usage=usage(n)))
    blocker = orch_home / "not-a-dir"  # the ledger is unreachable: rows go to the outbox
    blocker.write_text("a file where a directory should be")
    monkeypatch.setenv("ORCH_LEDGER_URL", f"sqlite:///{blocker}/ledger.db")
    real = store._write_tmp

    def full_disk(path, text, *args, **kwargs):
        if path.name in ("metadata.json", "wave.json") and '"running"' not in text[:2000]:
            raise OSError(28, "No space left on device")
        return real(path, text, *args, **kwargs)

    monkeypatch.setattr(store, "_write_tmp", full_disk)
    run = orch.run_wave([f"m{n}" for n in range(1, 5)])
    monkeypatch.setattr(store, "_write_tmp", real)
    wave = run.doc["wave_id"]
    stale = json.loads((orch_home / "runs" / wave / "wave.json").read_text())
    assert stale["status"] == "running"  # what the full disk left
    ended = subprocess.Popen(["true"])  # the wave's process has exited since (exit 2): a
    ended.wait()  # wave.json naming a process that is gone
    stale["pid"] = ended.pid
    (orch_home / "runs" / wave / "wave.json").write_text(json.dumps(stale))

    doc = json.loads(CliRunner().invoke(cli, ["status", wave, "--json"]).stdout)
    assert [leg["status"] for leg in doc["legs"]] == ["complete"] * 4, doc["legs"]
    costs = [(usage(n)["prompt_tokens"] * IN_PRICE + usage(n)["completion_tokens"]
              * OUT_PRICE) / 1e6 for n in range(1, 5)]
    assert [leg["cost_usd"] for leg in doc["legs"]] == pytest.approx(costs)
    assert doc["status"] == "complete" and doc["cost_usd"] == pytest.approx(sum(costs))
    assert all("repaired from the outbox" in " ".join(leg["notes"]) for leg in doc["legs"])
