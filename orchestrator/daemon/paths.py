"""Where the daemon's socket lives, and what makes a daemon fit for a client.

The socket is ``$XDG_RUNTIME_DIR/orch/orch.sock`` (else ``ORCH_HOME/run/orch.sock``), in a
directory only its owner may enter (0700). A client uses a daemon only when it runs the same
orch version with the same ``ORCH_HOME``, ``config.json`` and plugin switches: anything else
would make the run differ from an in-process one. Standard library only (the client path).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from orchestrator import __version__
from orchestrator.config import home
from orchestrator.errors import OrchError

SOCKET = "orch.sock"
LOCK = "orch.lock"  # held by the daemon for its whole life: one starts at a time
_FIX = "set XDG_RUNTIME_DIR to a directory only you can enter"
PROTOCOL = 1


def run_dir() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "orch" if runtime else home() / "run"


def socket_path() -> Path:
    return run_dir() / SOCKET


def pid_path() -> Path:
    return run_dir() / "orch.pid"


def log_path() -> Path:
    return run_dir() / "serve.log"


def ensure_run_dir() -> Path:
    """The socket's directory, created 0700; refused when another user owns it or it is
    open to others (someone could swap the socket)."""
    path = run_dir()
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = path.stat()
    if st.st_uid != os.getuid():
        raise OrchError(f"{path} belongs to another user (uid {st.st_uid}); set "
                        "XDG_RUNTIME_DIR to your own runtime directory")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


def take_lock() -> int:
    """The daemon's life lock (``flock`` on ``orch.lock``), as an open descriptor: the one a
    client that started this daemon passed down (autostart.py), else a new one. Raises
    :class:`OrchError` when another daemon holds it (it runs, or is warming up)."""
    import fcntl

    inherited = os.environ.pop("ORCH_SERVE_LOCK_FD", None)
    if inherited and inherited.isdigit():
        fd = int(inherited)
    else:
        fd = os.open(ensure_run_dir() / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
    os.set_inheritable(fd, False)  # no job's subprocess keeps the daemon's lock
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise OrchError(f"another daemon runs or is starting on {socket_path()}: "
                        "`orch serve status`") from None
    return fd


class Untrusted(OrchError):  # noqa: N818 - a verdict on a path, carried to the caller
    """The socket's directory, the socket or its listener is not this user's: nothing may be
    said to it. ``str()`` is the one line to show, its fix included."""


def check_owned(path: Path, kind: str = "socket") -> None:
    """Raise :class:`Untrusted` unless the socket at ``path`` and its directory are this
    user's: neither a symlink, both owned by our uid, the directory 0700 (nobody else could
    have put the socket there or swapped it). Checked with ``lstat``: a link is never
    followed. A missing socket is no verdict (FileNotFoundError)."""
    uid = os.getuid()
    os.lstat(path)  # FileNotFoundError: nothing listens there, nothing to judge
    for item, what in ((path.parent, "directory"), (path, kind)):
        st = os.lstat(item)
        if stat.S_ISLNK(st.st_mode):
            raise Untrusted(f"the daemon's {what} {item} is a symlink (owner uid "
                            f"{st.st_uid}): not trusted; {_FIX}")
        if st.st_uid != uid:
            raise Untrusted(f"the daemon's {what} {item} belongs to uid {st.st_uid}, not to "
                            f"you (uid {uid}): not trusted; {_FIX}")
        if what == "directory" and stat.S_IMODE(st.st_mode) & 0o077:
            raise Untrusted(f"the daemon's directory {item} (owner uid {st.st_uid}) is open "
                            f"to others (mode {stat.S_IMODE(st.st_mode):o}): not trusted; "
                            f"`chmod 700 {item}` if it is yours")
        if what == "socket" and not stat.S_ISSOCK(st.st_mode) or \
                what == "file" and not stat.S_ISREG(st.st_mode):
            raise Untrusted(f"{item} (owner uid {st.st_uid}) is not a {what}: not trusted; "
                            "remove it")


def check_listener(sock, path: Path) -> None:
    """Raise :class:`Untrusted` unless the process listening at the other end of our own
    connection runs as our uid (``SO_PEERCRED``: the kernel's word, not the peer's)."""
    import socket
    import struct

    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    if uid != os.getuid():
        raise Untrusted(f"the daemon listening on {path} (pid {pid}) runs as uid {uid}, not "
                        f"as you (uid {os.getuid()}): not trusted; {_FIX}")


def _plugin_files(config: bytes) -> dict:
    """The plugins directory's files as they are now: a daemon that loaded other ones is
    not the client's (directory.py)."""
    from orchestrator.plugin_host.directory import stamps

    try:
        section = json.loads(config or b"{}").get("plugins")
    except (ValueError, AttributeError):
        section = None
    return stamps(section if isinstance(section, dict) else None)


def compat() -> dict:
    """What the daemon and a client must share for a job to run alike in both."""
    root = home().expanduser().absolute()
    try:
        data = (root / "config.json").read_bytes()
    except OSError:
        data = b""
    digest = hashlib.sha256(data)
    for name in ("ORCH_PLUGINS", "ORCH_DISABLE_PLUGINS", "ORCH_PLUGINS_DIR"):  # which load
        digest.update(f"\0{name}={os.environ.get(name, '')}".encode())
    digest.update(json.dumps(_plugin_files(data)).encode())  # the single-file plugins
    return {"version": __version__, "protocol": PROTOCOL, "home": str(root),
            "config": digest.hexdigest()[:16]}
