"""Where the daemon's socket lives, and what makes a daemon fit for a client.

The socket is ``$XDG_RUNTIME_DIR/orch/orch.sock``. Without ``XDG_RUNTIME_DIR`` (a container,
CI, ``su``) it is ``$TMPDIR/orch-UID/HOME_DIGEST/orch.sock`` (``/tmp`` by default): a directory
of this user's that is checked before every use, since anyone may create names in ``/tmp``
first: each level must be a real directory (``lstat``: no symlink), owned by this uid, open to
no one else (0700); one that is not makes runs go in-process, and ``orch doctor`` says why
and what to do (:func:`why_cold`). One daemon per ``ORCH_HOME`` there (the digest), as a
client only uses a daemon of its own home.

A client uses a daemon only when it runs the same orch version with the same ``ORCH_HOME``,
``config.json``, plugin switches and process settings (:data:`SETTINGS`): anything else would
make the run differ from an in-process one. Standard library only (the client path).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path

from orchestrator import __version__
from orchestrator.config import home
from orchestrator.errors import OrchError

SOCKET = "orch.sock"
LOCK = "orch.lock"  # held by the daemon for its whole life: one starts at a time; its pid
_FIX = "set XDG_RUNTIME_DIR to a directory only you can enter"
PROTOCOL = 2
# What a run reads from its process besides the variables it declares (its keys, and where
# its record goes: app/declared.py): a daemon whose own differ from the client's would run
# it differently, so it is not used (each is one the daemon's allow-list keeps:
# environment.py).
SETTINGS = ("ORCH_PLUGINS", "ORCH_DISABLE_PLUGINS", "ORCH_PLUGINS_DIR", "ORCH_RUNS_DIR",
            "ORCH_DATA_HOME", "ORCH_HOOK_DEADLINE_S",
            "LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_MODE", "LITELLM_OFFLINE_MODE",
            "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
            "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "PYTHONPATH")


class Untrusted(OrchError):  # noqa: N818 - a verdict on a path, carried to the caller
    """The socket's directory, the socket or its listener is not this user's: nothing may be
    said to it. ``str()`` is the one line to show, its fix included."""


def _shared_base() -> Path:
    return Path(tempfile.gettempdir())


def _fallback_levels() -> tuple[Path, Path]:
    """(``$TMPDIR/orch-UID``, its folder for this ORCH_HOME)."""
    top = _shared_base() / f"orch-{os.getuid()}"
    digest = hashlib.sha256(str(home().expanduser().absolute()).encode()).hexdigest()[:12]
    return top, top / digest


def run_dir() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "orch" if runtime else _fallback_levels()[1]


def socket_path() -> Path:
    return run_dir() / SOCKET


def pid_path() -> Path:
    return run_dir() / "orch.pid"


def log_path() -> Path:
    return run_dir() / "serve.log"


def lock_path() -> Path:
    return run_dir() / LOCK


def _verify_dir(path: Path, *, fix_mode: bool) -> None:
    """``path`` is a directory of ours, open to no one else; raises :class:`Untrusted`."""
    st = os.lstat(path)
    uid = os.getuid()
    if stat.S_ISLNK(st.st_mode):
        raise Untrusted(f"{path} is a symlink (owner uid {st.st_uid}), not a directory of "
                        f"yours: not trusted; remove it or {_FIX}")
    if not stat.S_ISDIR(st.st_mode):
        raise Untrusted(f"{path} is not a directory (owner uid {st.st_uid}): not trusted; "
                        f"remove it or {_FIX}")
    if st.st_uid != uid:
        raise Untrusted(f"{path} belongs to uid {st.st_uid}, not to you (uid {uid}): not "
                        f"trusted; {_FIX}")
    if stat.S_IMODE(st.st_mode) & 0o077:
        if not fix_mode:
            raise Untrusted(f"{path} (yours) is open to others (mode "
                            f"{stat.S_IMODE(st.st_mode):o}): not trusted; `chmod 700 {path}`")
        os.chmod(path, 0o700)


def ensure_run_dir() -> Path:
    """The socket's directory, created 0700 and verified; :class:`Untrusted` (an OrchError)
    when another user owns it, it is a symlink, or (a shared fallback level) it is open."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        path = run_dir()
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        _verify_dir(path, fix_mode=True)  # in the user's own runtime directory
        return path
    top, path = _fallback_levels()
    for level in (top, path):
        try:
            os.mkdir(level, 0o700)
        except FileExistsError:
            pass
        _verify_dir(level, fix_mode=False)
    return path


def why_cold() -> str | None:
    """Why no daemon can listen here (every run then pays the cold start), or None; what
    does not exist yet is not made, only judged: a missing level must be creatable."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    levels = [run_dir()] if runtime else list(_fallback_levels())
    if runtime and not os.path.isdir(runtime):
        return f"XDG_RUNTIME_DIR={runtime} is not a directory; {_FIX}"
    for level in levels:
        try:
            _verify_dir(level, fix_mode=bool(runtime))
        except FileNotFoundError:
            parent = level.parent
            if not os.access(parent, os.W_OK | os.X_OK):
                return f"{level} cannot be made ({parent} is not writable); {_FIX}"
            return None  # made, 0700, when a daemon first starts
        except OrchError as exc:
            return str(exc)
        except OSError as exc:
            return f"{level} cannot be checked ({exc.strerror or exc}); {_FIX}"
    if len(os.fsencode(str(socket_path().absolute()))) > 107:
        return f"the socket path {socket_path()} is longer than a Unix socket allows; {_FIX}"
    return None


def take_lock() -> int:
    """The daemon's life lock (``flock`` on ``orch.lock``), as an open descriptor holding
    this process's pid (what ``orch serve status`` says while it warms up): the one a client
    that started this daemon passed down (autostart.py), else a new one. Raises
    :class:`OrchError` when another daemon holds it (it runs, or is starting)."""
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
        holder = starting()
        who = f" (pid {holder})" if holder else ""
        raise OrchError(f"a daemon{who} is already running or starting on {socket_path()}: "
                        "`orch serve status` says which") from None
    write_pid(fd, os.getpid())
    return fd


def write_pid(fd: int, pid: int) -> None:
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{pid}\n".encode("ascii"), 0)
    except OSError:
        pass


def starting() -> int | None:
    """The pid of a daemon that holds the life lock (warming up, or waiting for the run
    that started it to end, or running), read from the lock file when it is ours alone; None
    when no daemon holds it."""
    import fcntl

    path = lock_path()
    try:
        check_owned(path, kind="file")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (OSError, OrchError):
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:  # held: a daemon (or a run starting one) has it
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


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
    if not os.environ.get("XDG_RUNTIME_DIR"):  # the shared fallback: its upper level too
        _verify_dir(_fallback_levels()[0], fix_mode=False)


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
    """What the daemon and a client must share for a run to run alike in both."""
    root = home().expanduser().absolute()
    try:
        data = (root / "config.json").read_bytes()
    except OSError:
        data = b""
    digest = hashlib.sha256(data)
    for name in SETTINGS:  # which plugins load, which ledger, which proxy...
        digest.update(f"\0{name}={os.environ.get(name, '')}".encode())
    digest.update(json.dumps(_plugin_files(data)).encode())  # the single-file plugins
    return {"version": __version__, "protocol": PROTOCOL, "home": str(root),
            "config": digest.hexdigest()[:16]}
