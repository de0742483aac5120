"""A job's log lines reach its client: the daemon's one root handler renders each record as
the job's client asked (its ``LOG_LEVEL``, ``-q``, JSON lines or not) and sends it as a
``log`` event; a record of no job goes to the daemon's own log. Which job a record belongs
to is the context it was logged in (a contextvar the job's thread sets; anyio's and orch's
worker threads copy it). Nothing of the process is swapped: not a stream, not the
environment."""

from __future__ import annotations

import contextvars
import logging
import sys
import threading
from contextlib import contextmanager
from typing import Any

_job: contextvars.ContextVar[Any] = contextvars.ContextVar("orch_daemon_job", default=None)
_running: dict[int, int] = {}  # id(job) -> the level it asked for
_lock = threading.Lock()
_installed: dict[str, Any] = {}


def job_level(settings: dict[str, Any]) -> int:
    """The level a client asked for: its LOG_LEVEL, else warning (error with -q)."""
    name = settings.get("level")
    if name:
        level = getattr(logging, str(name).upper(), logging.WARNING)
        return level if isinstance(level, int) else logging.WARNING
    return logging.ERROR if settings.get("quiet") else logging.WARNING


class JobLogHandler(logging.Handler):
    """The root handler: a job's record to its client at its level; another to the log."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self._formatters: dict[bool, logging.Formatter] = {}

    def _format(self, record: logging.LogRecord, as_json: bool) -> str:
        from orchestrator import runtime

        fmt = self._formatters.get(as_json)
        if fmt is None:
            fmt = self._formatters[as_json] = runtime.formatter(as_json)
        return fmt.format(record)

    def emit(self, record: logging.LogRecord) -> None:
        from orchestrator import runtime
        from orchestrator.security.outlet import inert

        job = _job.get()
        try:
            if job is None:  # the daemon's own: its log (stderr), made inert like its lines
                if record.levelno >= _installed.get("level", logging.WARNING):
                    sys.stderr.write(inert(self._format(record, runtime.log_as_json())) + "\n")
                    sys.stderr.flush()
                return
            if record.levelno >= job.log_level:
                job.log_line(self._format(record, bool(job.log_settings.get("json"))))
        except Exception:
            self.handleError(record)


@contextmanager
def attached(job):
    """Records logged in this context (and threads that copy it) are ``job``'s."""
    token = _job.set(job)
    with _lock:
        _running[id(job)] = job.log_level
        _set_root_level()
    try:
        yield
    finally:
        _job.reset(token)
        with _lock:
            _running.pop(id(job), None)
            _set_root_level()


def _set_root_level() -> None:
    """The root logger's level is the lowest any running job asked for: a record no job
    wants (httpcore's debug lines at every request) is dropped before it is made."""
    logging.getLogger().setLevel(min([_installed.get("level", logging.WARNING),
                                      *_running.values()]))


class _JobLogging:
    """What ``runtime.configure_logging`` and ``runtime.quiet`` do in the daemon: nothing
    (each record's job decides)."""

    def configure(self) -> None:
        return None

    def quiet(self) -> None:
        return None


def install() -> None:
    """The job handler as the root logger's only one (once, before any job)."""
    import structlog

    from orchestrator import runtime

    if _installed:
        return
    root = logging.getLogger()
    runtime.configure_logging()
    _installed.update(handlers=list(root.handlers), level=runtime.log_level(),
                      root_level=root.level)
    root.handlers = [JobLogHandler()]
    _set_root_level()
    structlog.configure(
        processors=[*runtime._shared(), structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        logger_factory=structlog.stdlib.LoggerFactory(), cache_logger_on_first_use=True)
    runtime.job_logging = _JobLogging()
    runtime.configure_logging.cache_clear()


def uninstall() -> None:
    """Put the root logger back (a daemon run inside a test process)."""
    from orchestrator import runtime

    if not _installed:
        return
    root = logging.getLogger()
    root.handlers = _installed["handlers"]
    root.setLevel(_installed["root_level"])
    runtime.job_logging = None
    runtime.configure_logging.cache_clear()
    _installed.clear()
