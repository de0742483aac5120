"""`orch serve`: the daemon's socket, its faults, its keys, and a client that stays light.

The fanout and council CLI tests run both in-process and through a daemon (the
``both_ways`` fixture); here are the faults: a client's signals and death, the daemon's
death mid-wave, an older daemon, another uid."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.testing.daemon import client, daemon_in_thread
from orchestrator.testing.scripted_server import Reply

pytestmark = pytest.mark.slow
ORCH = [sys.executable, "-m", "orchestrator"]


@pytest.fixture
def xdg(tmp_path, monkeypatch, orch_home):
    run = tmp_path / "xdg"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    return run


def sock(xdg: Path) -> Path:
    return xdg / "orch" / "orch.sock"


def wait_for(predicate, timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.05)


@pytest.fixture
def daemon_process(xdg):
    """A real daemon process (it can be killed); stopped at the end."""
    procs = []

    def start(code: str | None = None) -> subprocess.Popen:
        argv = [*ORCH, "serve", "start", "--foreground"] if code is None else \
            [sys.executable, "-c", code]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        path = sock(Path(os.environ["XDG_RUNTIME_DIR"]))
        wait_for(lambda: path.exists() or proc.poll() is not None, what="the socket")
        assert proc.poll() is None, proc.communicate()
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
            proc.communicate(timeout=60)


def wave_dirs(home: Path) -> list[Path]:
    return [p for p in (home / "runs").glob("*") if (p / "wave.json").exists()]


def test_socket_and_directory_are_the_owners_only(xdg, daemon_process):
    daemon_process()
    assert stat.S_IMODE(sock(xdg).parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(sock(xdg).stat().st_mode) == 0o600
    status = client(["serve", "status", "--json"])
    doc = json.loads(status.stdout)
    assert status.exit_code == 0 and doc["socket"] == str(sock(xdg))
    again = client(["serve", "start"])
    assert again.exit_code == 0 and f"already running (pid {doc['pid']})" in again.stdout
    reload = client(["serve", "reload"])
    assert reload.exit_code == 0 and "reloaded" in reload.stdout
    assert client(["serve", "stop"]).exit_code == 0
    assert not sock(xdg).exists()
    gone = client(["serve", "status"])
    assert gone.exit_code == 3 and "not running" in gone.stdout


def test_a_client_sigkilled_mid_wave_has_its_job_cancelled_and_finalised(
        orch, scripted_server, orch_home, xdg):
    orch.provider()
    scripted_server.script("slow", Reply(text="never", latency=60))
    scripted_server.script("ok", Reply(text="fine"))
    with daemon_in_thread() as daemon:
        proc = subprocess.Popen([*ORCH, "fanout", "-m", "scripted/slow", "-p", "x", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_for(lambda: scripted_server.count("slow") == 1, what="the request")
        proc.kill()
        proc.communicate(timeout=30)
        wait_for(lambda: not daemon.jobs, what="the job to end")
        (wave,) = wave_dirs(orch_home)
        doc = json.loads((wave / "wave.json").read_text())
        assert doc["status"] == "aborted" and doc["signal"] == signal.SIGTERM
        assert doc["legs"][0]["status"] == "aborted"
        # and the daemon serves the next client as before
        after = client(["fanout", "-m", "scripted/ok", "-p", "x", "--json"])
        assert after.exit_code == 0 and json.loads(after.stdout)["legs"][0]["answer"] == "fine"
        assert daemon.served == 2


def test_a_client_sigint_mid_wave_is_130_and_the_wave_is_final(
        orch, scripted_server, orch_home, xdg):
    orch.provider()
    scripted_server.script("slow", Reply(text="never", latency=60))
    with daemon_in_thread() as daemon:
        proc = subprocess.Popen([*ORCH, "fanout", "-m", "scripted/slow", "-p", "x", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: scripted_server.count("slow") == 1, what="the request")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert daemon.served == 1
    assert proc.returncode == 130, err
    doc = json.loads(out)
    assert doc["status"] == "aborted" and doc["signal"] == signal.SIGINT
    wave = json.loads((orch_home / "runs" / doc["wave_id"] / "wave.json").read_text())
    assert wave["status"] == "aborted" and wave["exit_code"] == 130


def test_the_daemon_killed_mid_wave_is_one_line_and_status_rebuilds_the_wave(
        orch, scripted_server, orch_home, xdg, daemon_process):
    orch.provider()
    scripted_server.script("slow", Reply(text="never", latency=60))
    scripted_server.script("ok", Reply(text="done"))
    daemon = daemon_process()
    proc = subprocess.Popen([*ORCH, "fanout", "-m", "scripted/ok,scripted/slow", "-p", "x"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: scripted_server.count("slow") == 1 and scripted_server.count("ok") == 1,
             what="both requests")
    (wave,) = wave_dirs(orch_home)
    wait_for(lambda: (orch_home / "runs" / f"{wave.name}-1" / "metadata.json").exists()
             and json.loads((orch_home / "runs" / f"{wave.name}-1" / "metadata.json")
                            .read_text())["status"] == "complete", what="leg 1's end")
    recorded = json.loads((wave / "wave.json").read_text())
    assert (recorded["pid"], recorded["client_pid"]) == (daemon.pid, proc.pid)
    running = json.loads(client(["status", wave.name, "--json"]).stdout)
    assert running["status"] == "running"  # its runner, the daemon, is alive
    proc.send_signal(signal.SIGSTOP)  # the client stays alive while its runner dies:
    daemon.kill()
    daemon.wait()  # reaped: a zombie would still look alive to `orch status`
    try:  # liveness is the runner's pid, never the client's
        meanwhile = json.loads(client(["status", wave.name, "--json"]).stdout)
        assert meanwhile["status"] == "partial" and meanwhile.get("rebuilt") is True
    finally:
        proc.send_signal(signal.SIGCONT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert err.strip().splitlines()[-1] == (
        f"orch: the orch daemon died; the run's files are as after a kill: "
        f"`orch status {wave.name}`")
    status = client(["status", wave.name, "--json"])
    doc = json.loads(status.stdout)
    assert doc["status"] == "partial" and doc.get("rebuilt") is True, status.output
    assert [leg["status"] for leg in doc["legs"]] == ["complete", "aborted"]


def test_an_older_daemon_is_refused_with_the_fix(orch, scripted_server, xdg, daemon_process):
    orch.provider()
    scripted_server.script("m", Reply(text="in-process answer"))
    old = ("import orchestrator, orchestrator.daemon.paths as p, orchestrator.daemon.server as s;"
           "p.__version__ = s.__version__ = '0.0.1'; s.run(None)")
    daemon_process(old)
    result = client(["fanout", "-m", "scripted/m", "-p", "x"])
    assert result.exit_code == 0 and "in-process answer" in result.stdout
    assert result.stderr.splitlines()[0] == (
        "orch: the running daemon is orch 0.0.1, this is orch 0.1.0: it was refused; stop it "
        "with `orch serve stop` (this run goes in-process)")
    status = client(["serve", "status"])
    assert status.exit_code == 1 and "orch serve stop" in status.stdout
    assert client(["serve", "stop"]).exit_code == 0  # the fix works on the old daemon
    assert not sock(xdg).exists()


def test_no_daemon_runs_in_process(orch, scripted_server, xdg):
    orch.provider()
    scripted_server.script("m", Reply(text="hello"))
    with daemon_in_thread() as daemon:
        result = client(["fanout", "--no-daemon", "-m", "scripted/m", "-p", "x", "--json"])
        assert result.exit_code == 0 and daemon.served == 0
        doc = json.loads(result.stdout)
        assert doc["pid"] != os.getpid()  # that subprocess ran the wave itself
        assert doc["client_pid"] == doc["pid"]  # ...and was the command the user ran
        via = client(["fanout", "-m", "scripted/m", "-p", "x", "--json"])
        assert via.exit_code == 0 and daemon.served == 1
        served = json.loads(via.stdout)
        assert served["pid"] == os.getpid()  # the daemon (this process) did
        assert served["client_pid"] not in (os.getpid(), doc["pid"], None)  # for its client


def test_only_the_keys_a_job_reads_are_sent_and_none_is_written(
        orch, scripted_server, orch_home, xdg, monkeypatch):
    from orchestrator.daemon.job import Job

    secret, other = "sk-serve-test-0123456789abcdef", "unrelated-key-9876543210"
    orch.provider(api_key_env="SCRIPTED_TEST_KEY")
    monkeypatch.setenv("SCRIPTED_TEST_KEY", secret)
    monkeypatch.setenv("UNRELATED_API_KEY", other)
    scripted_server.script("m", Reply(text=f"echo {secret}"))
    sent: list[dict] = []
    made = Job.__init__

    def spy(self, chan, request, *args, **kwargs):
        sent.append(dict(request.get("keys") or {}))
        made(self, chan, request, *args, **kwargs)

    monkeypatch.setattr(Job, "__init__", spy)
    with daemon_in_thread():
        result = client(["fanout", "-m", "scripted/m", "-p", "x", "--json"])
    assert result.exit_code == 0, result.output
    # the key its model needs, declared by the prepared run; not UNRELATED_API_KEY
    from orchestrator.app.declared import RECORD

    assert [{k: v for k, v in s.items() if k not in RECORD} for s in sent] == [
        {"SCRIPTED_TEST_KEY": secret}]
    request = scripted_server.requests_for("m")[0]
    assert request.headers.get("authorization") == f"Bearer {secret}"  # it was sent
    assert secret not in result.output and "***" in result.stdout
    for path in orch_home.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    assert other not in result.output


def test_two_jobs_at_once_each_send_their_own_clients_key(
        orch, scripted_server, orch_home, xdg):
    """Two clients with different values of one key variable, their waves overlapping in one
    daemon (and a third checking litellm models' keys meanwhile, in its own process, where
    it fails before a word reaches the daemon): every request carries its own client's
    key."""
    orch.provider(api_key_env="SCRIPTED_TEST_KEY")
    keys = {"a": "sk-serve-a-0123456789abcdef", "b": "sk-serve-b-fedcba9876543210"}
    for side in keys:
        for i in range(6):
            scripted_server.script(f"{side}{i}", Reply(text=f"{side}{i}", latency=0.3))
    with daemon_in_thread() as daemon:
        procs = {}
        for side, key in keys.items():
            env = dict(os.environ, SCRIPTED_TEST_KEY=key)
            models = ",".join(f"scripted/{side}{i}" for i in range(6))
            procs[side] = subprocess.Popen([*ORCH, "fanout", "-m", models, "-p", "x", "--json"],
                                           env=env, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True)
        litellm_names = client(["fanout", "-m", "openai/o1,anthropic/c1,groq/g1", "-p", "x"],
                               env={k: v for k, v in os.environ.items()
                                    if not k.endswith("_API_KEY")})
        done = {side: proc.communicate(timeout=120) for side, proc in procs.items()}
        assert daemon.served == 2
    assert litellm_names.exit_code == 1 and "needs" in litellm_names.stderr
    for side, key in keys.items():
        assert procs[side].returncode == 0, done[side][1]
        assert json.loads(done[side][0])["status"] == "complete"
        for i in range(6):
            (request,) = scripted_server.requests_for(f"{side}{i}")
            assert request.headers.get("authorization") == f"Bearer {key}", (side, i)


def test_another_uid_is_refused(xdg, daemon_process, monkeypatch, request):
    if os.getuid() != 0:
        pytest.skip("switching uid needs root")
    import shutil
    import tempfile

    runtime = Path(tempfile.mkdtemp(prefix="orch-xdg-"))  # a path nobody may walk to
    runtime.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(runtime, ignore_errors=True))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    daemon_process()
    path = sock(runtime)

    def connect_as_nobody() -> str:
        pid = os.fork()
        if pid == 0:  # the child: become nobody, then try
            code = 0
            try:
                os.setgid(65534)
                os.setuid(65534)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(10)
                try:
                    s.connect(str(path))
                except PermissionError:
                    code = 10  # the 0700 directory / 0600 socket stopped it
                else:
                    try:
                        s.sendall(b"\x00\x00\x00\x0d" + b'{"t":"hello"}')
                        code = 20 if s.recv(4) == b"" else 30  # 20: SO_PEERCRED closed it
                    except (ConnectionResetError, BrokenPipeError):
                        code = 20
            finally:
                os._exit(code)
        return {10: "permission", 20: "closed", 30: "answered"}.get(
            os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), "?")

    assert connect_as_nobody() == "permission"
    os.chmod(path.parent, 0o777)  # take the file modes away: the peer check still refuses
    os.chmod(path, 0o777)
    try:
        assert connect_as_nobody() == "closed"
    finally:
        os.chmod(path.parent, 0o700)
        os.chmod(path, 0o600)


def test_idle_stop_and_daemon_auto(orch, scripted_server, xdg, monkeypatch):
    monkeypatch.delenv("ORCH_DAEMON")  # the suite's "manual" would override config.json
    orch.provider()
    orch.config(daemon="auto", serve={"idle_minutes": 0.05})
    scripted_server.script("m", Reply(text="hi"), Reply(text="hi"))
    first = client(["fanout", "-m", "scripted/m", "-p", "x"])  # starts one, runs in-process
    assert first.exit_code == 0 and "hi" in first.stdout
    wait_for(lambda: sock(xdg).exists(), what="the daemon `daemon: auto` starts")
    wait_for(lambda: client(["serve", "status"]).exit_code == 0, what="it answers")
    second = client(["fanout", "-m", "scripted/m", "-p", "x", "--json"])
    assert second.exit_code == 0
    pid = json.loads(second.stdout)["pid"]
    assert pid != os.getpid()
    wait_for(lambda: not sock(xdg).exists(), timeout=60, what="the idle stop (3 s)")
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), what="its exit")


def test_the_client_path_imports_neither_litellm_nor_sqlmodel(orch, scripted_server, xdg):
    """The client prepares the run itself (config, plugins, models, keys: pluggy and the
    plugins load), but what makes a cold start cold stays in the daemon: litellm, the
    ledger's database layer, the HTTP stack, pydantic."""
    from orchestrator.testing.imports import imported_by

    orch.provider()
    scripted_server.script("m", Reply(text="light"))
    with daemon_in_thread() as daemon:
        proc, heavy = imported_by(
            ["fanout", "-m", "scripted/m", "-p", "x"],
            ("litellm", "sqlmodel", "sqlalchemy", "httpx", "openai", "pydantic", "pluggy"))
        assert daemon.served == 1
    assert "light" in proc.stdout, proc.stderr
    assert heavy == ["pluggy"] or all(m == "pluggy" or m.startswith("pluggy.") for m in heavy)


@pytest.mark.parametrize("garbage", [b"\x00\x00\x00\x05nope!", b"\xff\xff\xff\xffxx",
                                     b"\x00\x00\x00\x02[]", b"GET / HTTP/1.0\r\n\r\n"])
def test_garbage_on_the_socket_is_closed_and_the_daemon_goes_on(orch, scripted_server, xdg,
                                                               garbage):
    orch.provider()
    scripted_server.script("m", Reply(text="still here"))
    with daemon_in_thread() as daemon:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(str(daemon.path))
        s.sendall(garbage)
        s.shutdown(socket.SHUT_WR)
        try:
            said = s.recv(1 << 16)
        except ConnectionResetError:  # closed with the rest unread
            said = b""
        assert said == b""  # closed, nothing said
        s.close()
        result = client(["fanout", "-m", "scripted/m", "-p", "x"])
    assert result.exit_code == 0 and "still here" in result.stdout
