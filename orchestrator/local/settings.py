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
    n_threads: int | None = 2  # None: the cores free as the server starts (with_threads)
    n_threads_batch: int | None = None  # steps of several tokens (slots, prompts); None: n_threads
    threads_reason: str = "local.n_threads"  # why n_threads is what it is (orch local status)
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
        pinned = raw.get("n_threads") is not None  # else counted as the server starts
        return cls(
            n_ctx=_number(raw, "n_ctx", 8192, int, 128, cfg),
            max_slots=_number(raw, "max_slots", 4, int, 1, cfg, top=64),
            n_threads=_number(raw, "n_threads", None, int, 1, cfg),
            threads_reason="local.n_threads" if pinned else "",
            n_threads_batch=_number(raw, "n_threads_batch", None, int, 1, cfg),
            idle_s=_number(raw, "idle_minutes", 15, float, 0, cfg) * 60.0,
            port=_number(raw, "port", 0, int, 0, cfg, top=65535),
            max_tokens=_number(raw, "max_tokens", 512, int, 0, cfg),
            start_timeout_s=_number(raw, "start_timeout_s", 120, float, 1, cfg),
            server_command=tuple(command) if command else None,
            server=server,
            models=models,
        )


def with_threads(settings: LocalSettings) -> LocalSettings:
    """``settings`` with its thread count, counted now when config left it to orch: the
    server's start is the moment the free cores matter (and the only one that pays for
    looking at them)."""
    from dataclasses import replace

    if settings.n_threads is not None:
        return settings
    threads, why = free_cores()
    return replace(settings, n_threads=threads, threads_reason=why)


def default_threads() -> int:
    """The threads the local server gets unless ``local.n_threads`` says: :func:`free_cores`
    (bench/bench_local.py)."""
    return free_cores()[0]


SAMPLE_S = 0.2  # how long the start looks at the cores before it picks the threads


def free_cores(cores: int | None = None, busy: float | None = None) -> tuple[int, str]:
    """(threads, why): the cores free as the server starts, at least one. On an idle machine
    every core: a decode step of several slots then uses them all, and 4 local legs decode
    at 1.3x+ the tokens/s of one (docs/performance.md). On a busy one a single thread:
    llama.cpp's threads meet at a barrier every step, and a thread waiting for a core that
    another program holds stalls them all (2 threads ran 8x slower than 1 at load 13 on 2
    cores). ``cores``: usable cores (default: this process's CPU affinity); ``busy``: how
    many of them other programs keep busy (default: :func:`busy_cores`, now)."""
    usable = _usable()
    if cores is None:
        cores = len(usable)
    if busy is None:
        busy = busy_cores(usable)
    threads = max(1, min(cores, int(cores - busy + 0.5)))
    return threads, f"{threads} of {cores} cores free ({busy:.1f} busy) as the server started"


def busy_cores(usable: list[int] | None = None, seconds: float = SAMPLE_S) -> float:
    """How many of the ``usable`` cores other programs keep busy now: their busy share over
    ``seconds`` (Linux's /proc/stat), summed. Not the 1-minute load average, which still
    counts for a minute work that has ended (a `pip install` just before the first run
    left a 2-core machine at load 0.6-1.1 while it sat idle, and the server got one thread:
    33 tok/s where two give 58, docs/performance.md). Elsewhere: the load average."""
    import time

    usable = _usable() if usable is None else usable
    first = _cpu_times(usable)
    if first is None:
        try:
            return max(0.0, os.getloadavg()[0])
        except OSError:
            return 0.0
    time.sleep(seconds)
    then = _cpu_times(usable) or first
    busy = 0.0
    for cpu, (idle0, total0) in first.items():
        idle1, total1 = then.get(cpu, (idle0, total0))
        spent = total1 - total0
        if spent > 0:
            busy += 1.0 - (idle1 - idle0) / spent
    return min(float(len(usable)), max(0.0, busy))


def _usable() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def _cpu_times(cpus: list[int]) -> dict[int, tuple[int, int]] | None:
    """{cpu: (idle ticks, all ticks)} from /proc/stat, or None where there is none."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            lines = stat.read().splitlines()
    except OSError:
        return None
    wanted = {f"cpu{n}": n for n in cpus}
    out = {}
    for line in lines:
        name, _, rest = line.partition(" ")
        if name in wanted:
            ticks = [int(x) for x in rest.split()[:8]]  # user..steal; guest is inside user
            out[wanted[name]] = (ticks[3] + ticks[4], sum(ticks))
    return out or None


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
