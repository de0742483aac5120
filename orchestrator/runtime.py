"""Process-wide set-up done once: config, plugins, logging, and the (slow) litellm import."""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING

from orchestrator.config import Config

if TYPE_CHECKING:  # the plugin host (pluggy, the entry-point scan) loads when first asked for
    from orchestrator.plugin_host.plugins import PluginManager


@functools.cache
def config() -> Config:
    return Config.load()


@functools.cache
def plugin_manager(enabled: bool = True) -> PluginManager:
    from orchestrator.plugin_host.plugins import load

    return load(config().section("plugins"), enabled=enabled,
                warn=lambda line: notice(line, "warning"))


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is now (click's test runner swaps it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def log_as_json() -> bool:
    """JSON lines only when asked (``--log-json``, ``ORCH_LOG_JSON=1``); otherwise one human
    line each, on a terminal or not, in the ``orch: LEVEL: ...`` form of orch's own lines, so
    a pipe or a CI log never mixes JSON with ``orch:`` lines."""
    return os.environ.get("ORCH_LOG_JSON") == "1"


# ``orch serve`` runs many clients' runs in one process: it sets this to an object whose
# ``configure()`` and ``quiet()`` leave each record to its job (orchestrator/daemon/joblog.py).
job_logging = None


@functools.cache
def configure_logging() -> None:
    """One renderer for every record, standard library (litellm, httpx, ...) and structlog
    alike: one human line each (``orch: warning: ...``), JSON lines only with --log-json, at
    LOG_LEVEL (default warning); stdout stays clean. A record with
    ``exc_info`` carries its traceback (LOG_LEVEL=debug shows an internal error's)."""
    if job_logging is not None:
        return job_logging.configure()
    import structlog

    handler = _StderrHandler()
    handler.setFormatter(formatter(log_as_json()))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(log_level())
    structlog.configure(
        processors=[*_shared(), structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(log_level()),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=True,
    )


def log_level() -> int:
    level = getattr(logging, os.environ.get("LOG_LEVEL", "warning").upper(), logging.WARNING)
    return level if isinstance(level, int) else logging.WARNING


def _shared() -> list:
    import structlog

    return [structlog.stdlib.add_log_level, structlog.processors.TimeStamper(fmt="iso", utc=True)]


def formatter(as_json: bool) -> logging.Formatter:
    """The formatter of orch's log lines: JSON lines or one human line each."""
    import structlog

    renderer = structlog.processors.JSONRenderer() if as_json else human_line
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_logger_name, *_shared()],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info,
                    _scrub_event,  # log lines are output too: no key value, no key shape
                    renderer])


NOTICE_LOGGER = "orch.notice"  # human_line prints its records without a level word


def notice(text: str, level: str = "notice", *, always: bool = False) -> None:
    """One line on stderr through the log handler: ``orch: TEXT`` for a notice (kept under
    ``-q`` only when ``always``), ``orch: LEVEL: TEXT`` otherwise. Faces and core say it
    through ``orchestrator.notices.say``; the logging it rides on is this module's."""
    configure_logging()
    text = " ".join(str(text).split())
    if level == "notice":
        logging.getLogger(NOTICE_LOGGER).log(logging.ERROR if always else logging.WARNING,
                                             "%s", text)
    else:
        logging.getLogger("orch").log(logging.getLevelName(level.upper()), "%s", text)


def human_line(logger, method, event: dict) -> str:
    """``orch: warning: rate_limit_hold model=x wait_s=3`` (a traceback, when there is one,
    on the lines after it). One line each: on a terminal rich's live table prints it above
    itself (stderr is its proxy while it draws), so the table is never cut by it."""
    event = dict(event)
    level = event.pop("level", "info")
    text = str(event.pop("event", ""))
    trace = event.pop("exception", None)
    if NOTICE_LOGGER in (event.get("logger"), event.get("logger_name")):
        level = ""  # a notice (orchestrator/notices.py): `orch: TEXT`
    for key in ("timestamp", "logger", "logger_name", "_record", "_from_structlog"):
        event.pop(key, None)
    pairs = " ".join(f"{k}={v}" for k, v in event.items())
    line = f"orch: {level}: {text}" if level else f"orch: {text}"
    line += f" {pairs}" if pairs else ""
    return f"{line}\n{trace}" if trace else line


def _scrub_event(logger, method, event: dict) -> dict:
    from orchestrator.security.secrets import scrub_doc

    return scrub_doc({k: v if k == "exc_info" or isinstance(
        v, str | int | float | bool | None | list | dict) else str(v) for k, v in event.items()})


def quiet() -> None:
    """``-q``: from here on only errors reach stderr (warnings such as ``rate_limit_hold``
    are dropped), unless LOG_LEVEL asks for more. Undone by ``configure_logging.cache_clear()``
    and the next ``log()``."""
    if os.environ.get("LOG_LEVEL"):
        return
    if job_logging is not None:
        return job_logging.quiet()
    import structlog

    configure_logging()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    logging.getLogger().setLevel(logging.ERROR)


def log():
    import structlog

    configure_logging()
    return structlog.get_logger("orch")


_litellm_lock = threading.Lock()
_litellm_module = None


def litellm():
    """Import litellm once, quietly: nothing on stdout, its loggers routed to ours. Safe
    from any thread: a face may start the import on one (app/warm.py) while the wave starts
    on another; whoever needs it first waits for that one import."""
    global _litellm_module
    if _litellm_module is None:
        with _litellm_lock:
            if _litellm_module is None:
                _litellm_module = _import_litellm()
    return _litellm_module


def _import_litellm():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    import gc
    import warnings

    # pydantic warns about litellm's TypedDicts (ReadOnly) on import and on first use.
    warnings.filterwarnings("ignore", category=UserWarning, module=r"pydantic\..*")
    import litellm as _litellm
    _litellm.suppress_debug_info = True
    _litellm.set_verbose = False
    _litellm.drop_params = True
    _litellm.telemetry = False
    # legs stream (models/streamed.py) and orch prices the rebuilt answer itself: litellm's
    # logging of each finished stream (a second rebuild, its own cost lookup) is pure cost
    _litellm.disable_streaming_logging = True
    from orchestrator.models.litellm_patch import honest_usage, no_blind_resend, strict_counts

    no_blind_resend(_litellm)  # a 422 that names no parameter is not sent twice
    honest_usage(_litellm)  # usage litellm cannot read keeps its billed answer
    strict_counts()  # "prompt_tokens": true is no count, not 1 token
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm", "httpx", "openai"):
        lg = logging.getLogger(name)
        lg.handlers.clear()
        lg.propagate = True
        lg.setLevel(max(logging.WARNING, logging.getLogger().level))
    configure_logging()
    gc.freeze()  # litellm's import leaves a large heap; freezing it makes exit and GC cheap
    return _litellm
