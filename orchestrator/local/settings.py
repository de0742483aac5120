"""The ``local`` section of config.json: how the managed server runs, checked before any start.

Every value has a default, so a fresh machine needs no ``local`` section at all::

    "local": {"n_ctx": 8192, "max_slots": 4, "n_threads": 2, "idle_minutes": 15, "port": 0,
              "max_tokens": 512, "models": {"qwen": {"path": "...", "sha256": "..."}}}
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from orchestrator.config import Config
from orchestrator.errors import OrchError

SECTION = "local"
HOST = "127.0.0.1"  # the server never listens beyond this machine


@dataclass(frozen=True)
class LocalSettings:
    n_ctx: int = 8192  # per slot: a council's judge and chair packets fit (docs/local.md)
    max_slots: int = 4  # a wave of N local legs gets min(N, max_slots) parallel slots
    default_alias: str = "gemma3-270m"
    n_threads: int = 2
    n_threads_batch: int | None = None  # steps of several tokens (slots, prompts); None: n_threads
    idle_s: float = 15 * 60.0  # 0: never stop for idleness
    port: int = 0  # 0: pick a free port
    max_tokens: int = 512  # cap a base model's completion unless the request sets one; 0: none
    start_timeout_s: float = 120.0
    server_command: tuple[str, ...] | None = None  # replaces llama.cpp's server (tests, forks)
    server: str = "auto"  # auto: prebuilt xllamacpp, else a compiled one; prebuilt; built
    models: dict[str, dict[str, Any]] | None = None  # alias -> {"path", "sha256"} (orch local add)

    @classmethod
    def from_config(cls, cfg: Config) -> LocalSettings:
        raw = cfg.data.get(SECTION) or {}
        if not isinstance(raw, dict):
            raise OrchError(f"`{SECTION}` in {cfg.path} must be an object; fix or remove it")
        command = raw.get("server_command")
        if command is not None and (not isinstance(command, list) or not command
                                    or not all(isinstance(a, str) for a in command)):
            raise OrchError(f"`{SECTION}.server_command` in {cfg.path} must be a list of "
                            "strings, e.g. [\"/opt/llama-server\", \"--port\", \"{port}\", ...]")
        server = raw.get("server", "auto")
        if server not in ("auto", "prebuilt", "built"):
            raise OrchError(f"`{SECTION}.server` in {cfg.path} must be \"auto\", \"prebuilt\" "
                            f"or \"built\" (got {server!r}); fix it in config.json")
        models = raw.get("models") or {}
        if not isinstance(models, dict) or not all(
                isinstance(v, dict) and isinstance(v.get("path"), str) for v in models.values()):
            raise OrchError(f"`{SECTION}.models` in {cfg.path} must map an alias to "
                            "{\"path\": ..., \"sha256\": ...}; add models with `orch local add`")
        return cls(
            n_ctx=_number(raw, "n_ctx", 8192, int, 128, cfg),
            max_slots=_number(raw, "max_slots", 4, int, 1, cfg, top=64),
            n_threads=_number(raw, "n_threads", default_threads(), int, 1, cfg),
            n_threads_batch=_number(raw, "n_threads_batch", None, int, 1, cfg),
            idle_s=_number(raw, "idle_minutes", 15, float, 0, cfg) * 60.0,
            port=_number(raw, "port", 0, int, 0, cfg, top=65535),
            max_tokens=_number(raw, "max_tokens", 512, int, 0, cfg),
            start_timeout_s=_number(raw, "start_timeout_s", 120, float, 1, cfg),
            server_command=tuple(command) if command else None,
            server=server,
            models=models,
        )


def default_threads() -> int:
    """Half the cores (llama.cpp's own default is every physical core). Its threads spin while
    they wait for each other, so on a busy machine more threads is much slower, not faster
    (docs/performance.md)."""
    return max(1, (os.cpu_count() or 1) // 2)


def _number(raw: dict, key: str, default, kind, low, cfg: Config, top=None):
    value = raw.get(key, default)
    if value is None:
        return default
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and kind is int:
        ok = float(value).is_integer()
    if not ok or value < low or (top is not None and value > top):
        bound = f"between {low} and {top}" if top is not None else f"at least {low}"
        raise OrchError(f"`{SECTION}.{key}` in {cfg.path} must be a number {bound} "
                        f"(got {value!r}); fix it in config.json")
    return kind(value)
