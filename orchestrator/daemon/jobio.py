"""What a command sees of its process, made per job in the daemon.

A command run in-process reads ``sys.stdout``, ``sys.stderr``, ``sys.stdin``, ``os.environ``
and logs through the root logger. In the daemon many commands run at once, each for its own
client, so each of these is replaced once, at start, by a proxy that looks up the job of the
calling thread (a contextvar; threads a job starts inherit it) and falls back to the daemon's
own when no job runs there. The job's current directory is its thread's own (Linux
``unshare(CLONE_FS)``, see job.py), so relative paths need nothing here.
"""

from __future__ import annotations

import contextvars
import io
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, MutableMapping
from typing import Any

from orchestrator.security import secrets

_job: contextvars.ContextVar[Any] = contextvars.ContextVar("orch_daemon_job", default=None)


def current():
    return _job.get()


def bind(job) -> contextvars.Token:
    return _job.set(job)


class JobStream(io.TextIOBase):
    """``sys.stdout`` / ``sys.stderr``: the text goes to the calling job's client."""

    def __init__(self, name: str, fallback: Any) -> None:
        self.name = name  # "out" or "err"
        self.fallback = fallback

    def write(self, text: str) -> int:
        job = _job.get()
        if job is None:
            return self.fallback.write(text)
        if text:
            job.output(self.name, text)
        return len(text)

    def flush(self) -> None:
        if _job.get() is None:
            self.fallback.flush()

    def isatty(self) -> bool:
        job = _job.get()
        return self.fallback.isatty() if job is None else bool(job.tty.get(self.name))

    def fileno(self) -> int:
        if _job.get() is None:
            return self.fallback.fileno()
        raise io.UnsupportedOperation("a job's stream has no file descriptor")

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return "strict"


class JobStdin(io.TextIOBase):
    """``sys.stdin``: read from the client on first use (a pipe: all of it; a line for a
    prompt)."""

    def __init__(self, fallback: Any) -> None:
        self.fallback = fallback

    @property
    def buffer(self):
        job = _job.get()
        return self.fallback.buffer if job is None else io.BytesIO(job.stdin("all"))

    def read(self, size: int | None = -1) -> str:
        job = _job.get()
        if job is None:
            return self.fallback.read(size)
        return job.stdin("all").decode("utf-8", "replace")

    def readline(self, size: int | None = -1) -> str:
        job = _job.get()
        if job is None:
            return self.fallback.readline(size)
        return job.stdin("line").decode("utf-8", "replace")

    def isatty(self) -> bool:
        job = _job.get()
        return self.fallback.isatty() if job is None else bool(job.tty.get("in"))

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        if _job.get() is None:
            return self.fallback.fileno()
        raise io.UnsupportedOperation("a job's stdin has no file descriptor")

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


class JobEnviron(MutableMapping):
    """``os.environ``: a job sees its client's environment, never the daemon's. Key-named
    variables arrive only when the job reads them (``Job.fetch_env``): a client sends the
    keys its models need, no others."""

    def __init__(self, base: MutableMapping) -> None:
        self.base = base

    def _env(self) -> MutableMapping:
        job = _job.get()
        return self.base if job is None else job.env

    def __getitem__(self, name: str) -> str:
        job = _job.get()
        if job is None:
            return self.base[name]
        if name not in job.env and name in job.secret_names:
            job.fetch_env(name)
        return job.env[name]

    def get(self, name: str, default: Any = None) -> Any:  # litellm reads env at every call
        job = _job.get()
        if job is None:
            return self.base.get(name, default)
        env = job.env
        if name not in env and name in job.secret_names:
            job.fetch_env(name)
        return env.get(name, default)

    def __contains__(self, name: object) -> bool:
        return self.get(name) is not None  # type: ignore[arg-type]

    def __setitem__(self, name: str, value: str) -> None:
        job = _job.get()
        if job is None:
            self.base[name] = value
        else:
            job.env[name] = value

    def __delitem__(self, name: str) -> None:
        job = _job.get()
        if job is None:
            del self.base[name]
            return
        job.secret_names.discard(name)
        del job.env[name]

    def __iter__(self) -> Iterator[str]:  # what arrived: iterating fetches no key
        return iter(list(self._env()))

    def __len__(self) -> int:
        return len(self._env())

    def copy(self) -> dict:
        return dict(self.items())

    @property
    def _data(self):  # secrets.scan_env compares this to see whether anything changed
        job = _job.get()
        return getattr(self.base, "_data", None) if job is None else job.env


class JobLogHandler(logging.Handler):
    """The root handler: each record at its job's level, rendered as its job asks (JSON
    lines unless the client's stderr is a terminal), written to its job's stderr."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self._formatters: dict[bool, logging.Formatter] = {}

    def emit(self, record: logging.LogRecord) -> None:
        from orchestrator import runtime

        job = _job.get()
        if job is None:
            level = runtime.log_level()
        elif job.quiet and not os.environ.get("LOG_LEVEL"):
            level = logging.ERROR
        else:
            level = runtime.log_level()
        if record.levelno < level:
            return
        as_json = runtime.log_as_json()
        fmt = self._formatters.get(as_json)
        if fmt is None:
            fmt = self._formatters[as_json] = runtime.formatter(as_json)
        try:
            sys.stderr.write(fmt.format(record) + "\n")
        except Exception:
            self.handleError(record)


_running: dict[int, int] = {}  # id(job) -> its LOG_LEVEL
_levels_lock = threading.Lock()


def job_level(job, entering: bool) -> None:
    """The root logger's level is the lowest any running job asked for (LOG_LEVEL): a record
    no job wants (httpcore's debug lines at every request) is dropped before it is made."""
    with _levels_lock:
        if entering:
            name = str(job.env.get("LOG_LEVEL", "warning")).upper()
            level = getattr(logging, name, logging.WARNING)
            _running[id(job)] = level if isinstance(level, int) else logging.WARNING
        else:
            _running.pop(id(job), None)
        logging.getLogger().setLevel(min([_saved.get("daemon_level", logging.WARNING),
                                          *_running.values()]))


class JobLogging:
    """What ``runtime.configure_logging`` and ``runtime.quiet`` do in the daemon."""

    def configure(self) -> None:
        return None  # one handler decides per record (JobLogHandler)

    def quiet(self) -> None:
        job = _job.get()
        if job is not None:
            job.quiet = True


_saved: dict[str, Any] = {}


def install() -> None:
    """Swap in the per-job proxies (once, at the daemon's start, before any job)."""
    import structlog

    from orchestrator import runtime

    if _saved:
        return
    _saved.update(stdout=sys.stdout, stderr=sys.stderr, stdin=sys.stdin, environ=os.environ,
                  handlers=list(logging.getLogger().handlers), level=logging.getLogger().level,
                  start=threading.Thread.start, popen=subprocess.Popen.__init__)

    ensure_streams()
    os.environ = JobEnviron(os.environ)  # type: ignore[assignment]  # noqa: B003
    root = logging.getLogger()
    root.handlers = [JobLogHandler()]
    _saved["daemon_level"] = runtime.log_level()  # the daemon's own, before any job
    root.setLevel(_saved["daemon_level"])  # lowered while a job asks for more (job_level)
    structlog.configure(
        processors=[*runtime._shared(), structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        logger_factory=structlog.stdlib.LoggerFactory(), cache_logger_on_first_use=True)
    runtime.job_logging = JobLogging()
    runtime.configure_logging.cache_clear()
    secrets.add_finder(_clients_keys)
    _inherit_job_in_threads()
    _job_env_for_children()


def ensure_streams() -> None:
    """The process's streams as the job proxies (again, if a host such as pytest swapped
    them). Scrubbed once for good: a command's own scrubbed_output() is then a no-op, so two
    jobs never swap the process's streams under each other."""
    from orchestrator.security.scrubbed_io import ScrubbedStream

    for name, kind in (("stdout", "out"), ("stderr", "err")):
        stream = getattr(sys, name)
        if not (isinstance(stream, ScrubbedStream) and isinstance(stream.inner, JobStream)):
            setattr(sys, name, ScrubbedStream(JobStream(kind, stream)))
    if not isinstance(sys.stdin, JobStdin):
        sys.stdin = JobStdin(sys.stdin)


def uninstall() -> None:
    """Put the process back as it was (a daemon run inside a test process)."""
    from orchestrator import runtime

    if not _saved:
        return
    sys.stdout, sys.stderr, sys.stdin = _saved["stdout"], _saved["stderr"], _saved["stdin"]
    os.environ = _saved["environ"]  # noqa: B003
    root = logging.getLogger()
    root.handlers = _saved["handlers"]
    root.setLevel(_saved["level"])
    threading.Thread.start = _saved["start"]  # type: ignore[method-assign]
    subprocess.Popen.__init__ = _saved["popen"]  # type: ignore[method-assign]
    runtime.job_logging = None
    runtime.configure_logging.cache_clear()
    secrets.remove_finder(_clients_keys)
    _saved.clear()


def _clients_keys(text: str) -> tuple[int, str] | None:
    """A key value of the calling job's client in ``text`` (the briefing check)."""
    job = _job.get()
    return None if job is None else job.find_secret(text)


def _inherit_job_in_threads() -> None:
    """A thread a job starts (a tool call, a live display) belongs to that job."""
    start = threading.Thread.start

    def start_in_context(self: threading.Thread) -> None:
        if _job.get() is not None:
            ctx, run = contextvars.copy_context(), self.run
            self.run = lambda: ctx.run(run)  # type: ignore[method-assign]
        start(self)

    threading.Thread.start = start_in_context  # type: ignore[method-assign]


def _job_env_for_children() -> None:
    """A child process a job starts gets the job's environment, not the daemon's."""
    init = subprocess.Popen.__init__

    def popen_init(self, *args, **kwargs):
        if kwargs.get("env") is None and _job.get() is not None:
            kwargs["env"] = dict(os.environ)
        init(self, *args, **kwargs)

    subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
