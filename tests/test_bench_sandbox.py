"""Checks and command contestants run confined: a `verify` over an untrusted answer cannot write
outside its trial folder, read a key from orch's environment or open a socket, and a command
contestant cannot write outside its folder either. Before, a verify wrote a file outside the
trial folder as root with a secret it read from the environment."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.bakeoff.guard import Guard
from orchestrator.cli import cli
from orchestrator.sandbox import bwrap, environment
from orchestrator.testing.scripted_server import Reply

KEY = "sk-sandbox-probe-0123456789abcdef"
needs_bwrap = pytest.mark.skipif(bwrap.usable() is not None,
                                 reason=f"no sandbox here: {bwrap.usable()}")


def test_the_command_line_confines_and_hides(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    trial = Path("/tmp")  # checks and contestants run in folders under the private /tmp
    box = bwrap.Confinement(cwd=trial, writable=(trial,), readable=(home / "bin",),
                            hidden=(home, Path("/run")))
    argv = bwrap.argv(box, ["sh", "-c", "x"], "/usr/bin/bwrap")
    assert argv[:4] == ["/usr/bin/bwrap", "--ro-bind", "/", "/"]
    assert argv[-4:] == ["--", "sh", "-c", "x"]
    options = argv[:argv.index("--")]
    for flag in ("--unshare-all", "--die-with-parent", "--new-session"):
        assert flag in options
    assert "--share-net" not in options
    assert options[options.index("--cap-drop") + 1] == "ALL"
    pairs = list(zip(options, options[1:], strict=False))
    assert ("--tmpfs", "/tmp") in pairs and ("--tmpfs", str(home.resolve())) not in pairs  # under /tmp
    assert ("--tmpfs", "/run") in pairs
    # a private /tmp first, then what is shown again: the order bwrap applies them in
    assert options.index("--tmpfs") < options.index("--bind")
    assert ("--chdir", "/tmp") in pairs
    assert ("--json-status-fd", "{status-fd}") in pairs  # did the program run? (below)
    net = bwrap.argv(bwrap.Confinement(cwd=trial, network=True), ["true"])
    assert "--share-net" in net


def test_the_environment_holds_no_key_unless_named(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ORCH_TEST_TOKEN", KEY)
    env = environment.confined(declared={"MODE": "fast"}, home="/tmp")
    assert KEY not in env.values() and env["HOME"] == "/tmp" and env["MODE"] == "fast"
    assert "PATH" in env
    passed = environment.confined(passed=("OPENAI_API_KEY",))
    assert passed["OPENAI_API_KEY"] == KEY and "ORCH_TEST_TOKEN" not in passed


@needs_bwrap
def test_hostile_verify_and_command_are_confined(orch, scripted_server, orch_home, tmp_path,
                                                 monkeypatch):
    orch.provider()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    scripted_server.script("m", Reply(text="done"))
    outside = Path("/var/tmp") / f"orch-sandbox-probe-{uuid.uuid4().hex}"
    host_tmp = tmp_path / "written-from-inside"
    port = scripted_server.port
    connect = (f"{sys.executable} -c 'import socket; socket.create_connection("
               f"(\"127.0.0.1\", {port}), timeout=3); print(\"CONNECTED\")'")
    checks = {
        "write": f"echo pwned > {outside}; echo pwned > {host_tmp}; test -e {host_tmp} && "
                 f"test -e {outside}",
        "inside": "echo fine > made-here.txt && test -s made-here.txt",  # the control
        "env": f'env | grep -q {KEY} || cat /proc/{os.getpid()}/environ | grep -q {KEY}',
        "socket": connect,
        "socket-allowed": connect,  # the control: a task that asks for the network
    }
    cases = tmp_path / "cases"
    cases.mkdir()
    for name, verify in checks.items():
        (cases / f"{name}.json").write_text(json.dumps(
            {"id": name, "task": "Do it.", "verify": verify,
             "network": name == "socket-allowed"}))
    agent = f"echo pwned > {host_tmp}.agent; echo $OPENAI_API_KEY; pwd"
    (tmp_path / "bench.toml").write_text(textwrap.dedent(f"""\
        [bench]
        cases = "cases"
        trials = 1

        [[contestants]]
        name = "model"
        model = "scripted/m"
        tools = "none"

        [[contestants]]
        name = "agent"
        kind = "command"
        command = "sh"
        args = ["-c", "{agent}"]
        stdin = false
        """))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "results.json"
    result = CliRunner().invoke(cli, ["bench", "--config", "bench.toml", "--yes", "--out",
                                      str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["settings"]["confinement"] == "bwrap"
    passed = {(t["task"], t["contestant"]): t["passed"] for t in doc["trials"]}
    assert passed == {(task, c): task in ("inside", "socket-allowed")
                      for task in checks for c in ("model", "agent")}
    said = {t["task"]: t["check_output"] for t in doc["trials"] if t["contestant"] == "model"}
    assert "Read-only file system" in said["write"], said["write"]
    assert "Network is unreachable" in said["socket"] or "refused" in said["socket"], \
        said["socket"]
    assert said["env"].startswith("exit 1")
    assert not outside.exists() and not host_tmp.exists()
    agent_rows = [t for t in doc["trials"] if t["contestant"] == "agent"]
    assert not Path(f"{host_tmp}.agent").exists()
    assert all(KEY not in t["stdout"] for t in agent_rows)


@needs_bwrap
def test_a_verify_may_use_the_network_only_when_its_task_says_so(tmp_path):
    """The same socket, with and without ``network = true`` (in the unit, not the CLI)."""
    from orchestrator.bakeoff import tasks as T

    guard = Guard(bwrap=bwrap.found())
    verify = (f"{sys.executable} -c 'import socket; s = socket.socket(); "
              "s.bind((\"127.0.0.1\", 0)); print(\"BOUND\")'")
    for network in (False, True):
        t = T.load_task_data({"id": "n", "task": "x", "verify": verify, "network": network,
                              "git_init": False})
        folder = T.make_folder(t)
        try:
            verdict = T.grade(t, "", folder, guard)
        finally:
            T.remove_folder(folder)
        assert verdict.passed and verdict.error is None, verdict  # loopback exists inside


def test_without_a_sandbox_the_bench_refuses_unless_told(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on PATH
    bwrap.usable.cache_clear()
    try:
        cases = tmp_path / "cases"
        cases.mkdir()
        (cases / "t.toml").write_text('id = "t"\ntask = "x"\nverify = "true"\nsolution = "a"\n'
                                       'git_init = false\n')
        refused = CliRunner().invoke(cli, ["bench", "--selftest", "--cases", str(cases)])
        assert refused.exit_code == 1
        assert refused.output.strip().splitlines()[-1] == (
            "orch: error: bwrap (bubblewrap) is not installed: `verify` checks and command contestants "
            "run confined under bubblewrap; install bubblewrap (Debian/Ubuntu: apt install "
            "bubblewrap), or pass --unsafe-checks to run them with a scrubbed environment and "
            "resource limits only")
        unsafe = CliRunner().invoke(cli, ["bench", "--selftest", "--cases", str(cases),
                                          "--unsafe-checks"])
        assert "--unsafe-checks: verify checks and command contestants run without " \
            "bubblewrap" in unsafe.output
        assert "BAD" in unsafe.output  # it ran: `true` cannot fail, and it says so
        (tmp_path / "bench.toml").write_text(
            '[bench]\nbuiltin = "format"\n[[contestants]]\nname = "agent"\n'
            'command = "/bin/true"\n')
        check = CliRunner().invoke(cli, ["bench", "--config", str(tmp_path / "bench.toml"),
                                         "--check"])
        assert check.exit_code == 1, check.output
        assert check.output.splitlines() == [
            "sandbox: missing (bwrap (bubblewrap) is not installed; install bubblewrap "
            "(Debian/Ubuntu: apt install bubblewrap), or pass --unsafe-checks)",
            "agent: found (/bin/true)"]
    finally:
        bwrap.usable.cache_clear()


@needs_bwrap
def test_a_sandbox_that_cannot_be_set_up_is_said_not_taken_for_a_failing_check():
    """bwrap exits 1 when it cannot build the sandbox, like a check saying no: its status pipe
    tells the two apart, so such a trial is excluded (set-up), never counted as a failure,
    and a program cannot have its failure excluded by printing bwrap's words."""
    from orchestrator.sandbox.process import Limits, run

    argv = bwrap.argv(bwrap.Confinement(cwd=Path("/nonexistent-orch-dir")), ["true"])
    done = run(argv, cwd="/", env=environment.confined(), limits=Limits(timeout_s=30))
    assert done.sandbox_failed() == ("bwrap: Can't chdir to /nonexistent-orch-dir: No such "
                                     "file or directory")
    # a program inside that fails the same way is its own failure, whatever it prints
    lookalike = bwrap.argv(bwrap.Confinement(cwd=Path("/")),
                           ["sh", "-c", "echo \"bwrap: Can't chdir\" >&2; exit 1"])
    check = run(lookalike, cwd="/", env=environment.confined(), limits=Limits(timeout_s=30))
    assert check.exit_code == 1 and "bwrap: Can't chdir" in check.stderr.text()
    assert check.sandbox_failed() is None


READER = """\
import pathlib, sys
for p in PATHS:
    try:
        path = pathlib.Path(p)
        print(p, "SEEN", len(path.read_bytes()) if path.is_file() else sorted(path.iterdir()))
    except OSError as exc:
        print(p, "HIDDEN", type(exc).__name__)
"""


@needs_bwrap
def test_a_command_contestant_cannot_read_the_tasks_checks_or_results(tmp_path, monkeypatch,
                                                                     orch_home):
    """Before, the bench's task files (checks and solutions), the built-in suites and the
    results file were readable from inside the sandbox; now each is hidden, while the script
    bench.toml names (in the same folder as the results) is still shown."""
    from orchestrator.bakeoff.tasks import SUITES_DIR

    cases = tmp_path / "cases"
    cases.mkdir()
    task = cases / "t.json"
    task.write_text(json.dumps({"id": "t", "task": "Say done.", "verify": "true",
                                "solution": "the secret solution"}))
    out = tmp_path / "results.json"
    bugs = SUITES_DIR / "review" / "_bugs.json"
    paths = [str(task), str(cases), str(bugs), str(SUITES_DIR), str(out), str(tmp_path)]
    reader = tmp_path / "reader.py"  # the paths in its text: a path in `args` is shown
    reader.write_text(f"PATHS = {paths!r}\n" + READER)
    (tmp_path / "bench.toml").write_text(textwrap.dedent(f"""\
        [bench]
        cases = "cases"
        trials = 1

        [[contestants]]
        name = "reader"
        command = "{sys.executable}"
        args = ["{reader}"]
        stdin = false
        """))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["bench", "--config", "bench.toml", "--yes", "--out",
                                      str(out)])
    assert result.exit_code == 0, result.output
    [trial] = json.loads(out.read_text())["trials"]
    said = dict(line.split(" ", 1) for line in trial["stdout"].splitlines())
    assert said[str(task)].startswith("HIDDEN"), said
    assert said[str(bugs)].startswith("HIDDEN"), said
    assert said[str(out)].startswith("HIDDEN"), said
    for folder in (cases, SUITES_DIR):  # empty where they are there at all
        assert said[str(folder)] == "SEEN []" or said[str(folder)].startswith("HIDDEN"), said
    assert said[str(tmp_path)] == f"SEEN [{reader!r}]"  # the results' folder: only the script
    assert trial["passed"] and trial["status"] == "complete"  # its own script still ran


CHECKS = """\
import subprocess, time

def spawn(answer):
    subprocess.Popen(["setsid", "sleep", TOKEN], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    return True
"""


@pytest.mark.parametrize("confined", [False, pytest.param(True, marks=needs_bwrap)],
                         ids=["unsafe-checks", "bwrap"])
def test_no_process_a_check_or_a_contestant_starts_outlives_the_bench(tmp_path, monkeypatch,
                                                                      orch_home,
                                                                      confined):
    """A python check's child, the child of a verify killed at its limit, a command
    contestant's daemon: each escapes with setsid, and each ends with its trial (before:
    all three lived on without bubblewrap, the first two with it too)."""
    from test_sandbox_reaper import gone, living, token

    toks = {"check": token(), "killed": token(), "agent": token()}
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "checks_spawn.py").write_text(f"TOKEN = {toks['check']!r}\n" + CHECKS)
    (cases / "py.json").write_text(json.dumps(
        {"id": "py", "task": "Say done.", "expect": {"python": "checks_spawn:spawn"}}))
    (cases / "hang.json").write_text(json.dumps(
        {"id": "hang", "task": "Say done.", "check_timeout_s": 1,
         "verify": f"setsid sleep {toks['killed']} </dev/null >/dev/null 2>&1 & sleep 600"}))
    agent = f"setsid sleep {toks['agent']} </dev/null >/dev/null 2>&1 & echo done"
    (tmp_path / "bench.toml").write_text(textwrap.dedent(f"""\
        [bench]
        cases = "cases"
        trials = 1

        [[contestants]]
        name = "agent"
        command = "sh"
        args = ["-c", "{agent}"]
        stdin = false
        """))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "results.json"
    result = CliRunner().invoke(cli, ["bench", "--config", "bench.toml", "--yes", "--out",
                                      str(out), *([] if confined else ["--unsafe-checks"])])
    assert result.exit_code == 2, result.output  # the hanging check excludes its trial
    doc = json.loads(out.read_text())
    assert doc["settings"]["confinement"] == ("bwrap" if confined else
                                              "none (--unsafe-checks: scrubbed environment "
                                              "and resource limits only)")
    rows = {t["task"]: t for t in doc["trials"]}
    assert rows["py"]["passed"]
    assert rows["hang"]["excluded"] == "the check ran past its 1 s limit"
    for name, tok in toks.items():
        assert gone(tok, within=5.0), (name, living(tok))


def test_the_results_say_unsafe_checks_only_when_it_was_passed(orch, scripted_server,
                                                               tmp_path, monkeypatch):
    """Before, a bench that needed no sandbox, run where bubblewrap cannot run, was reported
    as run with `--unsafe-checks`, a flag nobody passed."""
    orch.provider()
    scripted_server.script("m", Reply(text="done"))
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "t.json").write_text(json.dumps({"id": "t", "task": "Say done.",
                                              "expect": {"contains": "done"},
                                              "git_init": False}))  # no git on PATH
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap here
    bwrap.usable.cache_clear()
    try:
        out = tmp_path / "results.json"
        result = CliRunner().invoke(cli, ["bench", "--cases", str(cases), "--models",
                                          "scripted/m", "--trials", "1", "--yes", "--out",
                                          str(out)])
    finally:
        bwrap.usable.cache_clear()
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["settings"]["confinement"] == \
        "none needed (no verify check and no command contestant)"
    report = (tmp_path / "results" / "report.md").read_text()
    assert "--unsafe-checks" not in report and "--unsafe-checks" not in result.output
