"""The bubblewrap command line that confines an untrusted program.

Inside: the whole filesystem read-only; the trial folder (and any folder declared writable)
read-write; a private empty ``/tmp``; the user's home, ``ORCH_HOME`` and ``/run`` (service
sockets: a read-only mount does not stop ``connect()``) hidden behind empty folders, with the
Python in use and ``PATH`` entries under them shown again read-only; the *secrets* (a
bench's task folders, its built-in suites, its results) hidden last, even inside what was
shown again; a fresh ``/dev`` and
``/proc``; every namespace unshared (no network unless asked, no view of other processes);
no capabilities; its own session (no typing into orch's terminal); it dies with orch.

:func:`argv` is pure (testable without bwrap); :func:`usable` probes once whether bwrap
runs here (it may be missing, or the kernel may refuse it user namespaces).
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.sandbox.process import STATUS_FD, Limits, run

INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt install bubblewrap)"


@dataclass(frozen=True)
class Confinement:
    """What the program may touch. Paths are made absolute and resolved by :func:`argv`."""

    cwd: Path
    writable: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()  # shown read-only even inside a hidden folder
    hidden: tuple[Path, ...] = field(default_factory=lambda: default_hidden())
    network: bool = False
    # hidden even where a readable or writable folder holds them: what the program must not
    # see at all (a bench's tasks, checks, solutions and results)
    secret: tuple[Path, ...] = ()


def default_hidden() -> tuple[Path, ...]:
    """The folders where keys, orch's records and service sockets live: home, ORCH_HOME and
    its runs, the XDG config, data and runtime folders, /run."""
    from orchestrator.config import home as orch_home
    from orchestrator.config import runs_dir

    out = [Path.home(), Path("/root"), orch_home(), runs_dir(), Path("/run"), Path("/var/run")]
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR"):
        if os.environ.get(name):
            out.append(Path(os.environ[name]))
    return tuple(out)


def default_readable() -> tuple[Path, ...]:
    """What a hidden home may hold that checks need to run: the Python in use (a venv and
    the interpreter it points at) and each ``PATH`` entry."""
    paths = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent]
    paths += [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    return tuple(paths)


def _real(paths: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        try:
            r = Path(os.path.realpath(Path(p).expanduser()))
        except (OSError, ValueError):
            continue
        if r.exists() and r != Path("/") and r not in out:
            out.append(r)
    return out


def _under(path: Path, folders: Iterable[Path]) -> bool:
    return any(path == f or f in path.parents for f in folders)


# what a program needs to run at all: a secret holding one of these is not hidden (a task
# folder of "/" or "/usr" would hide the system)
SYSTEM = (Path("/usr"), Path("/bin"), Path("/lib"), Path("/etc"))


def argv(c: Confinement, command: list[str], bwrap: str = "bwrap") -> list[str]:
    """The full command line: bwrap's options, then ``--``, then ``command``."""
    hidden = [h for h in _real(c.hidden) if h.is_dir()]
    writable = [w for w in _real(c.writable) if w.is_dir()]
    secret = [s for s in _real(c.secret) if s.is_dir()
              and not any(_under(x, [s]) for x in SYSTEM)]
    # shown again only where something hid them (everything else is read-only already)
    readable = [r for r in _real(c.readable) if _under(r, [*hidden, *secret, Path("/tmp")])
                and not _under(r, writable)]
    out = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
           "--tmpfs", "/tmp", "--unshare-all", "--die-with-parent", "--new-session",
           "--cap-drop", "ALL"]
    if c.network:
        out.append("--share-net")
        resolv = Path(os.path.realpath("/etc/resolv.conf"))  # often under /run
        if resolv.exists() and _under(resolv, hidden):
            readable.append(resolv)
    for path in sorted(hidden, key=lambda p: len(p.parts)):
        if not _under(path, [Path("/tmp")]):  # /tmp is private already
            out += ["--tmpfs", str(path)]
    for path in sorted(readable, key=lambda p: len(p.parts)):
        out += ["--ro-bind", str(path), str(path)]
    for path in sorted(writable, key=lambda p: len(p.parts)):
        out += ["--bind", str(path), str(path)]
    # a secret is hidden last, inside whatever showed it (a venv holding the built-in
    # suites), unless nothing shows it anyway (under a hidden folder or the private /tmp);
    # what the program was given inside a secret is shown again after it
    shown = [*readable, *writable]
    secret = [s for s in secret if not _under(s, [*hidden, Path("/tmp")]) or _under(s, shown)]
    for path in sorted(secret, key=lambda p: len(p.parts)):
        out += ["--tmpfs", str(path)]
    for path in sorted((p for p in shown if _under(p, secret)), key=lambda p: len(p.parts)):
        out += ["--ro-bind" if path in readable else "--bind", str(path), str(path)]
    cwd = Path(os.path.realpath(c.cwd))
    # bwrap reports the program's exit code there only if the program ran
    return [*out, "--json-status-fd", STATUS_FD, "--chdir", str(cwd), "--", *command]


def found() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def usable() -> str | None:
    """None when bwrap confines programs here; else why not, in a few words."""
    path = found()
    if path is None:
        return "bwrap (bubblewrap) is not installed"
    done = run(argv(Confinement(cwd=Path("/")), ["true"], path), cwd="/",
               env={"PATH": os.environ.get("PATH", os.defpath)}, limits=Limits(timeout_s=20),
               reap=False)
    if done.error or done.timed_out:
        return f"bwrap cannot run: {done.error or 'it did not answer in 20 s'}"
    if done.exit_code != 0:
        why = done.stderr.text().strip().splitlines()
        return f"bwrap cannot confine here: {why[-1] if why else f'exit {done.exit_code}'}"
    return None
