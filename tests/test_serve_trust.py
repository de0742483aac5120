"""The daemon's client authenticates the daemon before it says anything (issue 25).

A hostile co-tenant listens where the client looks: under another uid (``setpriv``), in a
0777 directory, behind a symlinked socket or directory. The client sends nothing (the fake
daemon's byte count is 0), prints one line naming the path and its owner, and runs the job
in-process. A daemon of our own uid is sent the prepared run and exactly the variables it
declared; asking for another gets nothing."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from orchestrator.testing.daemon import client
from orchestrator.testing.scripted_server import Reply

pytestmark = pytest.mark.slow
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2  # 40 characters: a token's shape

# A fake daemon, standard library only (it may run as another user): takes the socket the
# test bound (fd argv[1]), calls listen() itself (SO_PEERCRED reports the uid that called
# listen), greets like orch, asks for every key it can think of, and writes every byte it
# received to the pipe on fd argv[2].
FAKE = r"""
import json, os, socket, struct, sys
s = socket.socket(fileno=int(sys.argv[1]))
s.listen(4)
out = os.fdopen(int(sys.argv[2]), "wb", buffering=0)
while True:
    conn, _ = s.accept()
    conn.settimeout(5)
    got = b""
    try:
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            got += chunk
            if len(got) >= 4 and len(got) >= 4 + struct.unpack(">I", got[:4])[0]:
                body = json.dumps({"t": "hello", "ok": True, "pid": 1}).encode()
                conn.sendall(struct.pack(">I", len(body)) + body)
                for name in ("OPENAI_API_KEY", "GITHUB_TOKEN", "SCRIPTED_TEST_KEY"):
                    ask = json.dumps({"t": "env", "name": name, "id": 1}).encode()
                    conn.sendall(struct.pack(">I", len(ask)) + ask)
                got += b"|greeted|"
    except OSError:
        pass
    out.write(got + b"\n--\n")
    conn.close()
"""


class FakeDaemon:
    """The fake daemon above, listening at ``path``, as ``uid`` (None: ours)."""

    def __init__(self, path: Path, uid: int | None = None) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))  # bound here, listened on by the child: its uid answers
        read, write = os.pipe()
        self.read = read
        python = os.path.realpath(sys.executable)
        prefix = [] if uid is None else ["setpriv", f"--reuid={uid}", f"--regid={uid}",
                                         "--clear-groups"]
        fd = self.sock.fileno()
        self.proc = subprocess.Popen(
            [*prefix, python, "-I", "-S", "-c", FAKE, str(fd), str(write)],
            pass_fds=(fd, write), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE)
        os.close(write)

    def received(self) -> bytes:
        self.proc.terminate()
        self.proc.wait(10)
        self.sock.close()
        data = b""
        while chunk := os.read(self.read, 65536):
            data += chunk
        os.close(self.read)
        return data


def wait_listening(path: Path, proc: subprocess.Popen) -> None:
    """Until the child listens (a connect succeeds); the probe connection sends nothing."""
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(str(path))
            return
        except OSError:
            time.sleep(0.05)
        finally:
            s.close()
    raise AssertionError("the fake daemon never listened")


@pytest.fixture
def runtime_dir(orch_home, monkeypatch, request):
    """An XDG_RUNTIME_DIR under /tmp (short socket paths; a directory nobody else may enter
    unless a test opens it), with orch's directory 0700 in it."""
    base = Path(tempfile.mkdtemp(prefix="orch-trust-"))
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base))
    (base / "orch").mkdir(mode=0o700)
    return base


def fanout_in_process_despite(fake: FakeDaemon, orch, scripted_server, monkeypatch,
                              *, expect: str) -> None:
    orch.provider(api_key_env="SCRIPTED_TEST_KEY")
    monkeypatch.setenv("SCRIPTED_TEST_KEY", "sk-trust-test-0123456789abcdef")
    monkeypatch.setenv("GITHUB_TOKEN", GITHUB)
    scripted_server.script("m", Reply(text="answered in-process"))
    wait_listening(fake.path, fake.proc)
    result = client(["fanout", "-m", "scripted/m", "-p", "hi"])
    received = fake.received()
    assert received.replace(b"\n--\n", b"") == b"", received  # not even a hello
    assert result.exit_code == 0, result.output
    assert "answered in-process" in result.stdout
    lines = [line for line in result.stderr.splitlines() if "not trusted" in line]
    assert len(lines) == 1, result.stderr
    assert expect in lines[0] and "in-process" in lines[0], lines[0]
    assert "Traceback" not in result.stderr
    assert len(scripted_server.requests_for("m")) == 1


def test_a_listener_under_another_uid_is_told_nothing(orch, scripted_server, runtime_dir,
                                                      monkeypatch):
    if os.getuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("playing another user needs root and setpriv")
    path = runtime_dir / "orch" / "orch.sock"  # our directory, our socket file: only the
    fake = FakeDaemon(path, uid=65534)  # process listening on it is someone else
    fanout_in_process_despite(fake, orch, scripted_server, monkeypatch,
                              expect="runs as uid 65534")


def test_a_directory_open_to_everyone_is_not_trusted(orch, scripted_server, runtime_dir,
                                                     monkeypatch):
    (runtime_dir / "orch").chmod(0o777)
    fake = FakeDaemon(runtime_dir / "orch" / "orch.sock")
    fanout_in_process_despite(fake, orch, scripted_server, monkeypatch, expect="mode 777")


def test_a_symlinked_socket_is_not_trusted(orch, scripted_server, runtime_dir, monkeypatch):
    elsewhere = runtime_dir / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    fake = FakeDaemon(elsewhere / "real.sock")
    (runtime_dir / "orch" / "orch.sock").symlink_to(elsewhere / "real.sock")
    fanout_in_process_despite(fake, orch, scripted_server, monkeypatch, expect="symlink")


def test_a_symlinked_directory_is_not_trusted(orch, scripted_server, runtime_dir, monkeypatch):
    elsewhere = runtime_dir / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    fake = FakeDaemon(elsewhere / "orch.sock")
    (runtime_dir / "orch").rmdir()
    (runtime_dir / "orch").symlink_to(elsewhere)
    fanout_in_process_despite(fake, orch, scripted_server, monkeypatch, expect="symlink")


def test_a_directory_of_another_uid_is_not_trusted(orch, scripted_server, runtime_dir,
                                                   monkeypatch):
    if os.getuid() != 0:
        pytest.skip("chown to another user needs root")
    fake = FakeDaemon(runtime_dir / "orch" / "orch.sock")
    os.chown(runtime_dir / "orch", 65534, 65534)
    fanout_in_process_despite(fake, orch, scripted_server, monkeypatch,
                              expect="belongs to uid 65534")


def test_serve_start_and_status_do_not_take_a_foreign_listener_for_theirs(
        orch, runtime_dir):
    fake_dir = runtime_dir / "orch"
    fake_dir.chmod(0o777)
    fake = FakeDaemon(fake_dir / "orch.sock")
    wait_listening(fake.path, fake.proc)
    started = client(["serve", "start"])
    status = client(["serve", "status"])
    assert fake.received().replace(b"\n--\n", b"") == b""
    for result in (started, status):
        assert result.exit_code == 1, result.output
        assert "already running" not in result.output
        assert result.stderr.count("\n") == 1 and "not trusted" in result.stderr, result.stderr
        assert str(fake_dir) in result.stderr and "uid" in result.stderr


def test_a_daemon_of_ours_gets_only_the_keys_the_run_declared(
        orch, scripted_server, runtime_dir, monkeypatch):
    """Our own uid, our 0700 directory: the daemon is trusted; it is sent the prepared run
    and the value of the one variable it declared ($SCRIPTED_TEST_KEY), never
    $OPENAI_API_KEY or $GITHUB_TOKEN, and asking for them gets nothing (there is no such
    message any more)."""
    key = "sk-trust-test-0123456789abcdef"
    orch.provider(api_key_env="SCRIPTED_TEST_KEY")
    monkeypatch.setenv("SCRIPTED_TEST_KEY", key)
    monkeypatch.setenv("GITHUB_TOKEN", GITHUB)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-not-for-this-job-0123456789")
    path = runtime_dir / "orch" / "orch.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    seen: dict = {}

    def serve() -> None:
        from orchestrator.daemon.protocol import Channel

        conn, _ = listener.accept()
        chan = Channel(conn)
        chan.recv()
        chan.send({"t": "hello", "ok": True, "pid": 1})
        seen["run"] = chan.recv()
        for ident, name in enumerate(("OPENAI_API_KEY", "GITHUB_TOKEN")):
            chan.send({"t": "env", "name": name, "id": ident})
        doc = {"wave_id": "w", "status": "complete", "exit_code": 0, "legs": [],
               "usage": {"input_tokens": 0, "output_tokens": 0}, "cost_usd": 0.0,
               "cost_exact": True, "runs_dir": "/nowhere"}
        chan.send({"t": "event", "e": {"type": "ended", "document": doc, "exit_code": 0}})
        chan.send({"t": "exit", "code": 0})
        conn.settimeout(2)
        try:
            seen["after"] = conn.recv(1 << 16)
        except OSError:
            seen["after"] = b""
        chan.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    result = client(["fanout", "-m", "scripted/m", "-p", "hi"])
    thread.join(30)
    listener.close()
    assert result.exit_code == 0, result.output
    run = seen["run"]
    from orchestrator.app.declared import RECORD

    # the run's own provider's key, and where its record goes
    assert {k: v for k, v in run["keys"].items() if k not in RECORD} == {
        "SCRIPTED_TEST_KEY": key}
    assert set(run["prepared"]["key_vars"]) == {"SCRIPTED_TEST_KEY", *RECORD}
    assert GITHUB not in json.dumps(run) and "sk-openai-not" not in json.dumps(run)
    assert seen["after"] == b""  # asking for other variables got no answer at all
    assert GITHUB not in result.output
    assert scripted_server.requests_for("m") == []  # the (fake) daemon ran it, not this
    # client (which only checked the name against GET /models while it prepared the run)


def test_the_wire_is_length_prefixed_json():  # the fake daemon above speaks it by hand
    from orchestrator.daemon.protocol import Channel

    a, b = socket.socketpair()
    Channel(a).send({"t": "hello"})
    size = struct.unpack(">I", b.recv(4))[0]
    assert json.loads(b.recv(size)) == {"t": "hello"}
    a.close()
    b.close()


def test_no_socket_is_no_verdict_and_no_line(orch, scripted_server, runtime_dir):
    """Nothing listens: nothing to distrust, whatever the directory's mode."""
    (runtime_dir / "orch").chmod(0o777)
    orch.provider()
    scripted_server.script("m", Reply(text="in-process"))
    result = client(["fanout", "-m", "scripted/m", "-p", "hi"])
    assert result.exit_code == 0 and "in-process" in result.stdout, result.output
    assert "trusted" not in result.stderr, result.stderr


@pytest.mark.parametrize("planted", ["open directory", "foreign file"])
def test_serve_stop_never_signals_a_pid_someone_else_wrote(orch, runtime_dir, planted):
    if planted == "foreign file" and os.getuid() != 0:
        pytest.skip("chown to another user needs root")
    victim = subprocess.Popen(["sleep", "60"])
    pid_file = runtime_dir / "orch" / "orch.pid"
    pid_file.write_text(f"{victim.pid}\n")
    if planted == "open directory":
        (runtime_dir / "orch").chmod(0o777)
    else:
        os.chown(pid_file, 65534, 65534)
    try:
        result = client(["serve", "stop"])
        assert result.exit_code == 0 and "not running" in result.stdout, result.output
        assert victim.poll() is None  # still alive: it was never signalled
    finally:
        victim.kill()
        victim.wait()
