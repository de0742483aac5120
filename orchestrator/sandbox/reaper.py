"""Every process an untrusted program starts ends with it: the small launcher between orch
and the program (``python -I -S reaper.py [options] -- argv``, stdlib only, so it starts in
milliseconds and imports nothing of orch).

It makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): a descendant whose
parent exits is handed to it, not to init, so a process that escapes with ``setsid``, a
double fork or a daemon is still its descendant. When the program ends (exits, is killed, or
the launcher is told to stop: SIGTERM from orch at a time limit or an interrupt, or orch's
own death through ``PR_SET_PDEATHSIG``), it kills every descendant left with SIGKILL, over and
over until none is left, reaps them, and exits as the program did (its exit code, or killed
by the same signal). Under bubblewrap the sandbox's PID namespace ends with it too
(``--die-with-parent``); without bubblewrap (a ``python`` check, a parser, ``--unsafe-checks``)
this is the boundary.

It also sets the program's rlimits (memory: RLIMIT_DATA; file size: RLIMIT_FSIZE) between
fork and exec, and says on the ``--report`` pipe when the program could not be started.
"""

from __future__ import annotations

import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
SWEEPS = 200  # passes over the descendants before giving up (a fork bomb outruns nothing)
STOP = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # orch asks for the end, or died


def _prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def parents() -> dict[int, int]:
    """pid -> parent pid of every process this one can see (``/proc``)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1:
            out[int(name)] = int(fields[1])
    return out


def descendants(root: int) -> list[int]:
    """Every living process below ``root``, parents before children."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents().items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _reap() -> list[tuple[int, int]]:
    """Every child that has ended, reaped without waiting: (pid, status)."""
    ended = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended.append((pid, status))


def sweep(me: int) -> list[tuple[int, int]]:
    """Kill every descendant until none is left (an orphan of a killed one is handed to this
    process, and found on the next pass); what was reaped meanwhile."""
    reaped: list[tuple[int, int]] = []
    for n in range(SWEEPS):
        reaped += _reap()
        try:  # no child left: nothing below (an orphan is handed here, so a tree that
            ended = os.waitpid(-1, os.WNOHANG)  # lives on has its root among the children)
        except ChildProcessError:
            return reaped
        if ended[0]:
            reaped.append(ended)
        left = descendants(me)
        if not left:
            break
        if n > 10:  # still there: dying slowly (uninterruptible I/O), give them a moment
            time.sleep(0.01)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        reaped += _reap()
    while True:  # the zombies of the last pass
        try:
            reaped.append(os.waitpid(-1, 0))
        except ChildProcessError:
            return reaped


def _limits(data_kb: int | None, fsize_blocks: int | None) -> None:
    """In the child, before exec: a limit that cannot be set because a lower one is in force
    leaves the lower one."""
    import resource

    for which, value in ((resource.RLIMIT_DATA, data_kb * 1024 if data_kb else None),
                         (resource.RLIMIT_FSIZE, fsize_blocks * 512 if fsize_blocks else None)):
        if value is None:
            continue
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _args(argv: list[str]) -> tuple[dict[str, int], list[str]]:
    opts: dict[str, int] = {}
    while argv and argv[0] != "--":
        key, value = argv[0].split("=", 1)
        opts[key.lstrip("-")] = int(value)
        argv = argv[1:]
    return opts, argv[1:]


def main() -> None:
    opts, argv = _args(sys.argv[1:])
    report = opts.get("report")
    me = os.getpid()
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    # signals are taken synchronously (sigwaitinfo), so none can arrive between two steps
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD, *STOP})
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # orch died: end everything too
    if report is not None:
        os.set_inheritable(report, False)  # for the program, the pipe is not there
    # orch died before the death signal was armed: start nothing
    pid = -1 if opts.get("parent") and os.getppid() != opts["parent"] else os.fork()
    if pid == 0:
        try:
            for sig in (*STOP, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            _limits(opts.get("data_kb"), opts.get("fsize_blocks"))
            os.execvp(argv[0], argv)
        except OSError as exc:
            if report is not None:
                os.write(report, f"cannot start {argv[0]}: {exc.strerror or exc}".encode())
        os._exit(127)
    if report is not None:
        os.close(report)
    said = os.dup(2)  # where a failure of this launcher itself is said (not inherited)
    null = os.open(os.devnull, os.O_RDWR)  # only the program holds orch's pipes open
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:
        _supervise(pid, me)
    except BaseException as exc:  # a bug here: said, and nothing left running
        os.write(said, f"orch reaper: {type(exc).__name__}: {exc}\n".encode())
        sweep(me)
        os._exit(70)


def _supervise(pid: int, me: int) -> None:
    """Wait for the program (or a stop), end every descendant, exit as the program did."""
    status = None
    while pid > 0:
        for ended, code in _reap():  # the program, or an orphan handed over
            if ended == pid:
                status = code
        if status is not None or signal.sigwaitinfo({signal.SIGCHLD, *STOP}).si_signo \
                != signal.SIGCHLD:
            break
    sweep(me)
    _exit_as(status)  # stopped before the program ended: as killed (SIGKILL), whatever the
    # program made of its own end meanwhile (bubblewrap exits 1 when its child is killed)


def _exit_as(status: int | None) -> None:
    """Exit as the program did: its code, or killed by its signal (SIGKILL when it was
    stopped before it ended)."""
    if status is not None and os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    sig = os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) \
        else signal.SIGKILL
    if sig != signal.SIGKILL:  # its handler cannot be set, nor can it be blocked
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)


if __name__ == "__main__":
    main()
