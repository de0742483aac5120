"""A child process under limits: wall time, memory, file size, and how much of its output is
kept; and every process it starts ends with it.

The child runs in its own session (a terminal's Ctrl-C never reaches it), and every process
it starts ends with it, by one of two boundaries. Unconfined (a ``python`` check, a parser,
``--unsafe-checks``) it runs behind the reaper (:mod:`orchestrator.sandbox.reaper`), a
subreaper that, when the program ends or is stopped (its time limit, an interrupt, orch's
death), kills every process the program started, those that left its process group or
session (``setsid``) included. Under bubblewrap (``reap=False``) the sandbox's own PID
namespace is the boundary: nothing leaves it, and it ends when bwrap does, which dies with
orch (``--die-with-parent``) and is killed with its process group; no launcher is paid for. Its stdout and stderr are read
as they come: the first ``keep_bytes`` of each are kept and the rest is read, counted and
dropped, so a program that prints gigabytes costs orch a fixed amount of memory, and a
program that prints forever still ends at its time limit (``timed_out``), never earlier.

Memory and file size are rlimits set between a fork and the program's exec, by the reaper or
by ``/bin/sh``'s ``ulimit`` (no ``preexec_fn`` here: orch has threads). The memory limit is RLIMIT_DATA (heap and private
writable mappings), which leaves the large address-space reservations of JavaScript and Go
runtimes alone.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

KEEP_BYTES = 8 << 20  # of each stream, by default
_CHUNK = 1 << 16
STATUS_FD = "{status-fd}"  # in argv: replaced by the number of a pipe the launcher reports on
REAPER = Path(__file__).with_name("reaper.py")
REAP_GRACE_S = 10.0  # how long the reaper may take to end everything before its group is killed


@dataclass(frozen=True)
class Limits:
    timeout_s: float
    memory_mb: int | None = None  # RLIMIT_DATA
    file_mb: int | None = None  # RLIMIT_FSIZE: the largest file it may write
    keep_bytes: int = KEEP_BYTES  # of stdout and of stderr


@dataclass
class Capture:
    """What a stream printed: its first ``keep_bytes`` and how much there was in all."""

    data: bytes = b""
    size: int = 0

    @property
    def cut(self) -> bool:
        return self.size > len(self.data)

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


@dataclass
class Finished:
    argv: list[str]
    exit_code: int | None  # None: it never started; negative: killed by that signal
    stdout: Capture = field(default_factory=Capture)
    stderr: Capture = field(default_factory=Capture)
    secs: float = 0.0
    timed_out: bool = False
    interrupted: bool = False
    error: str | None = None  # it could not be started: why
    status: bytes | None = None  # what the launcher wrote on STATUS_FD (None: no such pipe)

    def sandbox_failed(self) -> str | None:
        """Why bwrap could not set the sandbox up, when it could not. Told by bwrap's status
        pipe (it reports the program's exit code only when it ran), never by what the
        program printed: a program cannot pass its own failure off as the sandbox's."""
        if self.status is None or b'"exit-code"' in self.status or self.timed_out \
                or self.interrupted or self.exit_code is None:
            return None
        first = self.stderr.text().lstrip().split("\n", 1)[0]
        return first if first.startswith("bwrap: ") else "the sandbox could not be set up"

    @property
    def killed_by(self) -> str | None:
        """The signal that ended it (SIGKILL, SIGSEGV, ...), if one did."""
        if self.exit_code is None or self.exit_code >= 0:
            return None
        try:
            return signal.Signals(-self.exit_code).name
        except ValueError:
            return f"signal {-self.exit_code}"


class Running:
    """Processes started under limits, so an interrupt can kill them all: each blocks a worker
    thread, and ``stop`` kills every group (and any started after it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: dict[subprocess.Popen, bool] = {}  # -> behind the reaper?
        self.stopped = False

    def add(self, proc: subprocess.Popen, reaped: bool = True) -> None:
        with self._lock:
            self._procs[proc] = reaped
            if not self.stopped:
                return
        end(proc, reaped)  # started as the interrupt arrived

    def discard(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.pop(proc, None)

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            procs = list(self._procs.items())
        for proc, reaped in procs:
            end(proc, reaped)


def end(proc: subprocess.Popen, reaped: bool = True) -> None:
    """End the program and everything it started; never blocks. Behind the reaper: ask it
    (it ends them all, then exits; :func:`run` kills its group if it is late). Else: kill
    its process group (bwrap, whose PID namespace then ends)."""
    if not reaped:
        return kill_group(proc)
    try:
        proc.send_signal(signal.SIGTERM)  # not once it is reaped: its pid may be reused
    except (ProcessLookupError, PermissionError):
        pass


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _stop(proc: subprocess.Popen, reaped: bool) -> None:
    """End it all and wait: the reaper sweeps and exits; one that does not in time has its
    group killed (while it is unreaped, so its group id cannot be anyone else's)."""
    end(proc, reaped)
    try:
        proc.wait(REAP_GRACE_S)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        proc.wait()


def with_rlimits(argv: list[str], limits: Limits) -> list[str]:
    """``argv`` behind a ``/bin/sh`` that sets the rlimits and execs it (a limit that cannot
    be set because a lower one is in force leaves the lower one)."""
    sets = []
    if limits.memory_mb:
        sets.append(f"ulimit -d {int(limits.memory_mb) * 1024} 2>/dev/null")
    if limits.file_mb:
        sets.append(f"ulimit -f {int(limits.file_mb) * 2048} 2>/dev/null")  # 512-byte blocks
    if not sets:
        return list(argv)
    return ["/bin/sh", "-c", "; ".join([*sets, 'exec "$@"']), "sh", *argv]


def reaped(argv: list[str], limits: Limits, report: int | None = None) -> list[str]:
    """``argv`` behind the reaper, which sets the rlimits and ends every process it starts."""
    opts = [f"--parent={os.getpid()}"]
    if report is not None:
        opts.append(f"--report={report}")
    if limits.memory_mb:
        opts.append(f"--data_kb={int(limits.memory_mb) * 1024}")
    if limits.file_mb:
        opts.append(f"--fsize_blocks={int(limits.file_mb) * 2048}")  # 512-byte blocks
    return [sys.executable, "-I", "-S", str(REAPER), *opts, "--", *argv]


def run(argv: list[str], *, cwd: Path | str, env: Mapping[str, str], limits: Limits,
        stdin: bytes | None = None, running: Running | None = None,
        reap: bool = True) -> Finished:
    """Run ``argv`` to its end, its time limit, or ``running.stop()`` (blocking: call it in
    a worker thread). ``reap=False``: ``argv`` is its own boundary (bwrap with a PID
    namespace that dies with its parent), started without the reaper."""
    status_r = status_w = report_r = report_w = None
    if STATUS_FD in argv:
        status_r, status_w = os.pipe()
        argv = [str(status_w) if a == STATUS_FD else a for a in argv]
    if reap:
        report_r, report_w = os.pipe()  # the reaper says there when the program cannot start
    full = reaped(argv, limits, report_w) if reap else with_rlimits(argv, limits)
    passed = tuple(fd for fd in (report_w, status_w) if fd is not None)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(full, cwd=cwd, env=dict(env), start_new_session=True,
                                stdin=subprocess.PIPE if stdin is not None else
                                subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, pass_fds=passed)
    except OSError as exc:
        for fd in (status_r, report_r):
            if fd is not None:
                os.close(fd)
        return Finished(list(argv), None, error=f"cannot start {argv[0]}: "
                        f"{exc.strerror or exc}")
    finally:
        for fd in (status_w, report_w):
            if fd is not None:
                try:
                    os.close(fd)  # the launcher holds it now
                except OSError:
                    pass
    if running is not None:
        running.add(proc, reap)
    out, err = Capture(), Capture()
    timed_out, unstarted = False, b""
    try:
        if report_r is not None:
            # the time limit is the program's: it starts when the reaper has exec'd it (the
            # report pipe closes), not while the launcher itself starts up
            unstarted = _launched(report_r, start + limits.timeout_s)
            start = time.monotonic()
        timed_out = _pump(proc, stdin, out, err, limits, start)
        if timed_out:
            _stop(proc, reap)
        proc.wait()
    except BaseException:  # Ctrl-C in this thread, or any failure: the group goes too
        _stop(proc, reap)
        raise
    finally:
        if running is not None:
            running.discard(proc)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
    if unstarted:
        if status_r is not None:
            os.close(status_r)
        return Finished(list(argv), None, error=unstarted.decode("utf-8", "replace"))
    stopped = running is not None and running.stopped and not timed_out and proc.returncode < 0
    return Finished(list(argv), proc.returncode, out, err, time.monotonic() - start,
                    timed_out, interrupted=stopped, status=_drain(status_r))


def _launched(fd: int, deadline: float) -> bytes:
    """Wait until the reaper has exec'd the program (its end of ``fd`` closes: nothing was
    said) or could not (why, in a few words); closes ``fd``. At ``deadline`` it is taken
    as started, and the time limit does the rest."""
    said = b""
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while (left := deadline - time.monotonic()) > 0 and sel.select(left):
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    break
                said += chunk[:1000]
    finally:
        os.close(fd)
    return said


def _drain(fd: int | None) -> bytes | None:
    """What is waiting in a pipe whose writers are gone (or may linger: never blocks)."""
    if fd is None:
        return None
    os.set_blocking(fd, False)
    chunks = []
    try:
        while chunk := os.read(fd, _CHUNK):
            chunks.append(chunk)
            if sum(map(len, chunks)) > 1 << 16:
                break
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    return b"".join(chunks)


def _pump(proc: subprocess.Popen, stdin: bytes | None, out: Capture, err: Capture,
          limits: Limits, start: float) -> bool:
    """Feed stdin and drain stdout/stderr until both close; True if the time ran out first.
    Bytes past ``keep_bytes`` are counted and dropped."""
    sel = selectors.DefaultSelector()
    captures = {proc.stdout: out, proc.stderr: err}
    kept = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    for pipe in captures:
        sel.register(pipe, selectors.EVENT_READ)
    pending = memoryview(stdin or b"")
    if proc.stdin is not None:
        if pending:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
    deadline = start + limits.timeout_s
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            for key, _ in sel.select(min(left, 1.0)):
                if key.fileobj is proc.stdin:
                    try:
                        pending = pending[os.write(proc.stdin.fileno(), pending[:_CHUNK]):]
                    except BlockingIOError:
                        continue
                    except OSError:  # it closed its stdin: what it did not read is dropped
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(proc.stdin)
                        proc.stdin.close()
                    continue
                chunk = os.read(key.fileobj.fileno(), _CHUNK)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf = kept[key.fileobj]
                room = limits.keep_bytes - len(buf)
                if room > 0:
                    buf += chunk[:room]
                captures[key.fileobj].size += len(chunk)
        left = deadline - time.monotonic()
        try:
            proc.wait(max(left, 0.0))
        except subprocess.TimeoutExpired:  # it closed its pipes but went on running
            return True
        return False
    finally:
        sel.close()
        for pipe, buf in kept.items():
            captures[pipe].data = bytes(buf)
