"""How long a third party's hook may take, and what its failure to return looks like.

Shared by the hook runner (hooks.py) and the start-up hooks called before any runner exists
(plugins.py: ``register_commands``); it imports nothing of orch's but errors and
tool_thread, so either may use it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

from orchestrator.errors import OrchError

DEADLINE_S = 5.0  # a third party's hook, unless plugins.hook_deadline_s or the plugin says
WAVE_DEADLINE_S = 30.0  # wave_start / wave_end start servers, open connections
DEADLINE_ENV = "ORCH_HOOK_DEADLINE_S"


class HookTimeout(Exception):  # noqa: N818 - read as "plugin_errors: HookTimeout: ..."
    """An implementation did not return within its deadline; its thread was abandoned."""


class PluginExit(Exception):  # noqa: N818 - said as what the plugin did
    """An implementation raised SystemExit (or KeyboardInterrupt from its own thread): the
    plugin's failure, never the command's end."""


def hook_deadline_s(config=None) -> float | None:
    """Seconds a third party's hook may take, as the user set it: ``ORCH_HOOK_DEADLINE_S``,
    then config ``plugins.hook_deadline_s``; None when unset (each hook's default then:
    DEADLINE_S, WAVE_DEADLINE_S for wave_start and wave_end)."""
    raw: Any = os.environ.get(DEADLINE_ENV)
    where = DEADLINE_ENV
    if raw is None and config is not None:
        raw = (config.section("plugins") or {}).get("hook_deadline_s")
        where = "plugins.hook_deadline_s in config.json"
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise OrchError(f"{where} must be a number of seconds above 0 (got {raw!r}); "
                        f"fix it or unset it for the default {DEADLINE_S:g} s")
    return value


def plugin_call(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` as run on a worker: SystemExit and KeyboardInterrupt raised there are the
    plugin's doing (signals never reach a worker thread), handed back as its failure."""
    def run() -> Any:
        try:
            return fn()
        except (SystemExit, KeyboardInterrupt) as exc:
            raise PluginExit(f"{type(exc).__name__}: {exc}") from None
    return run


def call_blocking(fn: Callable[[], Any], seconds: float) -> Any:
    """``fn`` (a third party's hook) on a worker thread from synchronous code, waited for at
    most ``seconds``: HookTimeout past it, PluginExit if it tried to end the process."""
    from orchestrator import tool_thread

    try:
        return tool_thread.run_blocking(plugin_call(fn), seconds=seconds)
    except tool_thread.ToolTimeout:
        raise HookTimeout(f"did not return within {seconds:g} s") from None
