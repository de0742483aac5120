"""Where the daemon's socket lives, and what makes a daemon fit for a client.

The socket is ``$XDG_RUNTIME_DIR/orch/orch.sock`` (else ``ORCH_HOME/run/orch.sock``), in a
directory only its owner may enter (0700). A client uses a daemon only when it runs the same
orch version with the same ``ORCH_HOME``, ``config.json`` and plugin switches: anything else
would make the run differ from an in-process one. Standard library only (the client path).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from orchestrator import __version__
from orchestrator.config import home

SOCKET = "orch.sock"
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
    from orchestrator.errors import OrchError

    path = run_dir()
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = path.stat()
    if st.st_uid != os.getuid():
        raise OrchError(f"{path} belongs to another user (uid {st.st_uid}); set "
                        "XDG_RUNTIME_DIR to your own runtime directory")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


def compat() -> dict:
    """What the daemon and a client must share for a job to run alike in both."""
    root = home().expanduser().absolute()
    try:
        data = (root / "config.json").read_bytes()
    except OSError:
        data = b""
    digest = hashlib.sha256(data)
    for name in ("ORCH_PLUGINS", "ORCH_DISABLE_PLUGINS"):  # which plugins load
        digest.update(f"\0{name}={os.environ.get(name, '')}".encode())
    return {"version": __version__, "protocol": PROTOCOL, "home": str(root),
            "config": digest.hexdigest()[:16]}
