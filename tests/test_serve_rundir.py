"""Where the daemon listens without XDG_RUNTIME_DIR, and what a daemon warming up says.

Without XDG_RUNTIME_DIR (a container, CI, ``su``) the daemon listens in
``$TMPDIR/orch-UID/HOME_DIGEST``, a directory of this user's that every use checks: a
co-tenant (``setpriv --reuid`` plays one) who planted the name first, as a directory of
theirs or a symlink, gets nothing: runs go in-process, nothing is made inside it, and
``orch doctor``, ``orch serve status`` and ``orch serve start`` say why and what to do.
While a daemon warms up, ``orch serve status`` says "starting, pid N", ``orch serve start``
waits for it instead of failing, and a run in that window says it goes in-process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from orchestrator.testing.daemon import client, daemon_in_thread
from orchestrator.testing.scripted_server import Reply

pytestmark = pytest.mark.slow
NOBODY = 65534


@pytest.fixture
def shared_tmp(orch_home, monkeypatch, request):
    """A /tmp of our own making (world-writable, sticky, as /tmp is), as TMPDIR, and no
    XDG_RUNTIME_DIR: the fallback's base every user may create names in."""
    base = Path(tempfile.mkdtemp(prefix="orch-shared-tmp-"))
    base.chmod(0o1777)
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(base))
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    request.addfinalizer(lambda: setattr(tempfile, "tempdir", None))
    return base


def as_nobody(*argv: str) -> None:
    if os.getuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("playing another user needs root and setpriv")
    subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                    *argv], check=True, timeout=30)


def test_without_xdg_runtime_dir_runs_are_warm_in_a_checked_dir_of_ours(
        orch, scripted_server, shared_tmp):
    from orchestrator.daemon import paths

    orch.provider()
    scripted_server.script("m", Reply(text="warm"))
    top = shared_tmp / f"orch-{os.getuid()}"
    with daemon_in_thread() as daemon:
        assert daemon.path.parent.parent == top and daemon.path == paths.socket_path()
        result = client(["fanout", "-m", "scripted/m", "-p", "x", "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["pid"] == os.getpid() and daemon.served == 1
    for level in (top, daemon.path.parent):
        st = os.lstat(level)
        assert (st.st_uid, st.st_mode & 0o777) == (os.getuid(), 0o700)
    doctor = client(["doctor", "--json"])
    (row,) = [c for c in json.loads(doctor.stdout)["checks"] if c["section"] == "daemon"]
    assert row["status"] == "ok", row


@pytest.mark.parametrize("planted", ["their directory", "their symlink to theirs",
                                     "their symlink to ours", "ours but open"])
def test_a_co_tenants_planted_runtime_dir_is_refused_and_said(orch, scripted_server,
                                                              shared_tmp, planted):
    orch.provider()
    scripted_server.script("m", Reply(text="in-process"))
    top = shared_tmp / f"orch-{os.getuid()}"
    theirs = shared_tmp / "theirs"
    if planted == "their directory":
        as_nobody("mkdir", "-m", "0777", str(top))
    elif planted == "their symlink to theirs":
        as_nobody("mkdir", "-m", "0777", str(theirs))
        as_nobody("ln", "-s", str(theirs), str(top))
    elif planted == "their symlink to ours":
        ours = shared_tmp / "ours"
        ours.mkdir(mode=0o700)
        as_nobody("ln", "-s", str(ours), str(top))
    else:
        top.mkdir(mode=0o700)
        top.chmod(0o777)  # someone made our directory open: it is not made 0700 behind us
    before = sorted(p.name for p in shared_tmp.rglob("*"))

    run = client(["fanout", "-m", "scripted/m", "-p", "x"], env={**os.environ,
                                                                   "ORCH_DAEMON": "auto"})
    assert run.exit_code == 0 and "in-process" in run.stdout, run.output
    time.sleep(0.5)  # a daemon it started would have made its folder by now
    assert sorted(p.name for p in shared_tmp.rglob("*")) == before  # nothing made in it

    start = client(["serve", "start"])
    assert start.exit_code == 1 and "not trusted" in start.stderr, start.output
    assert start.stderr.count("\n") == 1 and str(top) in start.stderr
    status = client(["serve", "status"])
    assert status.exit_code == 3 and "cannot run here" in status.stdout, status.output
    doctor = client(["doctor", "--json"])
    (row,) = [c for c in json.loads(doctor.stdout)["checks"] if c["section"] == "daemon"]
    assert row["status"] == "warn" and "runs are cold" in row["detail"], row
    assert str(top) in row["detail"] and "XDG_RUNTIME_DIR" in row["fix"]
    if planted == "ours but open":
        assert os.stat(top).st_mode & 0o777 == 0o777


STARTER = """
import sys
from orchestrator.daemon import autostart
assert autostart.start_in_background(True)
print("started", flush=True)
sys.stdin.read()  # the daemon warms up once this 'run' ends
"""


@pytest.mark.timeout(400)  # one real daemon's warm-up, on a machine that may be busy
def test_a_daemon_warming_up_says_so(orch, scripted_server, tmp_path, monkeypatch):
    """A daemon started by a run waits for that run to end before it warms up: that window
    is held open here, then closed."""
    from orchestrator.daemon import paths

    run = tmp_path / "xdg"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    monkeypatch.setenv("ORCH_DAEMON", "auto")
    orch.provider()
    scripted_server.script("m", Reply(text="meanwhile"), Reply(text="warm now"))
    starter = subprocess.Popen([sys.executable, "-c", STARTER], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert starter.stdout.readline().strip() == "started"
        pid = paths.starting()
        assert pid and pid != starter.pid  # the daemon's own pid, in its life lock

        status = client(["serve", "status"])
        assert status.exit_code == 4 and f"starting, pid {pid}" in status.stdout, status.output
        during = client(["fanout", "-m", "scripted/m", "-p", "x", "--json"])
        assert during.exit_code == 0, during.output
        assert f"the daemon is starting (pid {pid}); this run goes in-process" in during.stderr
        assert json.loads(during.stdout)["pid"] != pid
        again = client(["serve", "start"])  # waits a little, then says so: no failure
        assert again.exit_code == 0 and f"starting (pid {pid})" in again.stdout, again.output
        assert "another daemon" not in again.output

        starter.stdin.close()  # the run that started it ended: it warms up now
        starter.wait(30)
        deadline = time.monotonic() + 110
        while client(["serve", "status"]).exit_code != 0:
            assert time.monotonic() < deadline, "the daemon never answered"
            time.sleep(0.2)
        after = client(["fanout", "-m", "scripted/m", "-p", "x", "--json"])
        assert after.exit_code == 0 and json.loads(after.stdout)["pid"] == pid
    finally:
        if starter.poll() is None:
            starter.kill()
        client(["serve", "stop"])
