"""``daemon: auto``, the default: a job that finds no daemon starts one for the next runs.

The run that starts it goes in-process; the daemon warms up once that run has ended (not
competing with it for the CPU), and later runs go to it until it stops after its idle time.
Only a ``Popen`` on the client's path (no wait), never two at once (an exclusive lock the
daemon inherits and holds for its whole life, with its pid in it: ``orch serve status``
says "starting" meanwhile), and nowhere it cannot work (no runtime directory of this user's
that passes its checks, paths.py; not Linux): then nothing is said here, and ``orch doctor``
says why runs are cold. Standard library only: the client path never loads litellm.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from orchestrator.daemon import paths
from orchestrator.errors import OrchError

MODES = ("auto", "manual", "off")
LOCK_FD_ENV = "ORCH_SERVE_LOCK_FD"  # the inherited lock, taken over by the daemon
AFTER_ENV = "ORCH_SERVE_AFTER_PID"  # the run that started it: warm up once it has ended
STARTER_WAIT_S = 1800.0
NOTED = "auto-noted"  # in the runtime directory: the note is said once per login session
SUN_PATH_MAX = 107  # a Unix socket's path, in bytes, without its terminating NUL


class BadMode(ValueError):
    """``ORCH_DAEMON`` or config.json's ``daemon`` holds no known value; ``str()`` says so."""


def mode() -> tuple[str, bool]:
    """(``auto``/``manual``/``off``, whether it was chosen): ``ORCH_DAEMON``, else
    config.json's ``daemon``, else ``auto``. ``manual``: use a daemon you started, start
    none; ``off``: every run in-process."""
    env = os.environ.get("ORCH_DAEMON", "").strip()
    if env:
        if env.lower() not in MODES:
            raise BadMode(f"ORCH_DAEMON={env!r} is not one of auto, manual, off; fix or unset it")
        return env.lower(), True
    value = _config_value()
    if value is None:
        return "auto", False
    if value is True or value is False:
        return ("auto" if value else "off"), True
    if not isinstance(value, str) or value.lower() not in MODES:
        raise BadMode(f"config.json: \"daemon\": {value!r} is not one of \"auto\", \"manual\", "
                      f"\"off\"; fix it in {paths.home() / 'config.json'}")
    return value.lower(), True


def _config_value():
    import json

    try:
        data = json.loads((paths.home() / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # no config, or one `orch` itself will refuse with its line
        return None
    return data.get("daemon") if isinstance(data, dict) else None


def _usable_run_dir(chosen: bool) -> Path | None:
    """The socket's directory when a daemon could listen there, else None: under
    ``XDG_RUNTIME_DIR`` (a login session's own directory), else the checked fallback of
    paths.py."""
    if not sys.platform.startswith("linux"):  # SO_PEERCRED (server.py)
        return None
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        try:
            st = os.stat(runtime)
        except OSError:
            return None
        if st.st_uid != os.getuid():
            return None
    if len(os.fsencode(str(paths.socket_path().absolute()))) > SUN_PATH_MAX:
        return None
    try:
        return paths.ensure_run_dir()
    except (OSError, OrchError):  # another user's directory, a read-only one: in-process
        return None


def start_in_background(chosen: bool) -> bool:
    """Start ``orch serve`` detached, unless one is already starting; True when started."""
    import fcntl

    run_dir = _usable_run_dir(chosen)
    if run_dir is None:
        return False
    try:
        fd = os.open(run_dir / paths.LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a daemon holds it (unusable here) or another run is starting one
            return False
        _spawn(run_dir, fd)
    except OSError:
        return False
    finally:
        os.close(fd)  # the daemon holds the lock now, through its own copy
    _note_once(run_dir)
    return True


def _spawn(run_dir: Path, fd: int) -> None:
    import subprocess

    from orchestrator.daemon.environment import daemon_environment

    # the daemon's own environment holds no key: a job asks its client for one (serve.md);
    # its warm-up must not take the CPU this run needs (AFTER_ENV)
    env = daemon_environment(os.environ, **{LOCK_FD_ENV: str(fd), AFTER_ENV: str(os.getpid())})
    with open(paths.log_path(), "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "orchestrator.daemon", "serve"],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                cwd=str(run_dir), pass_fds=(fd,), start_new_session=True)
    paths.write_pid(fd, proc.pid)  # `orch serve status`: starting, pid N


def _note_once(run_dir: Path) -> None:
    try:
        fd = os.open(run_dir / NOTED, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                     0o600)
    except OSError:
        return
    os.close(fd)
    print("orch: started a warm daemon in the background for the next runs (this one runs "
          "in-process; docs/serve.md); to keep every run in-process: --no-daemon, "
          "ORCH_DAEMON=off or \"daemon\": \"off\" in config.json", file=sys.stderr)


def wait_for_starter() -> None:
    """In a daemon a run started: wait until that run has ended before warming up (litellm's
    import and the warm-up would compete with it for the CPU). The lock is held meanwhile,
    so no other run starts a second daemon."""
    import time

    from orchestrator.pids import pid_alive

    pid = os.environ.pop(AFTER_ENV, "")
    if not pid.isdigit():
        return
    deadline = time.monotonic() + STARTER_WAIT_S
    while pid_alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
