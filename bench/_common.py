"""What the benchmark scripts share: the scripted server as a child process, results files."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
OFFLINE = {"LITELLM_OFFLINE_MODE": "true", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "LITELLM_MODE": "PRODUCTION"}


def offline() -> None:
    """litellm quiet and offline, as orchestrator.runtime.litellm() and the tests have it."""
    for key, value in OFFLINE.items():
        os.environ.setdefault(key, value)


def machine() -> dict:
    return {"cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}


def write_result(name: str, data: dict) -> Path:
    RESULTS.mkdir(exist_ok=True)
    data = {"bench": name, "at": time.strftime("%Y-%m-%dT%H:%M:%S"), **data}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return path


@contextmanager
def scripted_server(*, latency_ms: float, script: Path):
    """``python -m orchestrator.testing.scripted_server`` in its own process; yields its URL.

    A separate process keeps the server's threads off the benchmarked interpreter's GIL.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.testing.scripted_server", "--port", "0",
         "--latency-ms", str(latency_ms), "--script", str(script)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, **OFFLINE})
    try:
        url = proc.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError(f"scripted server did not start (printed {url!r})")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def rss_mb() -> float:
    """This process's resident set size now, in MiB (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    """This process's high-water resident set size (VmHWM), in MiB."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# -- the work both sides do ----------------------------------------------------------------

PROVIDER = "bench"
TOOL_SCHEMA = {"type": "function", "function": {
    "name": "noop", "description": "Does nothing; returns 'ok'.",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}


def write_script(path: Path, models: list[str], steps: int) -> Path:
    """Every model calls ``noop`` ``steps - 1`` times, then answers: ``steps`` requests a leg.

    A model's script is consumed once (the scripted server counts requests per model), so
    every run uses fresh model names.
    """
    # Distinct arguments each step: the doom-loop guard rightly stops a repeated call.
    replies = [{"tool_calls": [{"name": "noop", "arguments": {"n": k}}], "text": ""}
               for k in range(1, steps)] + [{"text": "done"}]
    path.write_text(json.dumps({m: replies for m in models}), encoding="utf-8")
    return path


class ModelNames:
    """Fresh model names, ``<prefix>0``, ``<prefix>1``...; ``all()`` for the script file."""

    def __init__(self, prefix: str, total: int) -> None:
        self._names = [f"{prefix}{i}" for i in range(total)]
        self._next = 0

    def all(self) -> list[str]:
        return list(self._names)

    def take(self, n: int) -> list[str]:
        if self._next + n > len(self._names):
            raise RuntimeError("benchmark used more model names than it scripted")
        out = self._names[self._next:self._next + n]
        self._next += n
        return out


def noop_plugin():
    """An in-process plugin offering one trivial tool, so every leg has a tool to call."""
    from orchestrator.hookspecs import hookimpl
    from orchestrator.tools import Tool

    class NoopTools:
        @hookimpl
        def register_tools(self, leg):
            return [Tool(name="noop", description=TOOL_SCHEMA["function"]["description"],
                         parameters=TOOL_SCHEMA["function"]["parameters"],
                         function=lambda n=0: "ok")]

    return NoopTools()


def builtin_plugins() -> list[str]:
    """The built-in plugins (entry points of the ``orch`` distribution): the benchmark runs
    what orch ships, not whatever third-party plugins happen to be installed."""
    from importlib import metadata

    from orchestrator.plugin_host.plugins import GROUP, OWN_DISTRIBUTION

    return sorted({ep.name for ep in metadata.entry_points(group=GROUP)
                   if ep.dist is not None and ep.dist.name == OWN_DISTRIBUTION})


def plugin_env(builtins: bool) -> dict[str, str]:
    """ORCH_PLUGINS allowlist: the built-ins (or none) plus the benchmark's ``bench_noop``."""
    return {"ORCH_PLUGINS": ",".join([*(builtin_plugins() if builtins else []), "bench_noop"])}


def provider_entry(url: str, max_concurrent: int | None) -> dict:
    entry: dict = {"base_url": url}
    if max_concurrent:
        entry["max_concurrent"] = max_concurrent  # the rate gate's ceiling (gate.py)
    return entry


def engine_setup(home: Path, url: str, *, builtins: bool = True,
                 max_concurrent: int | None = None):
    """ORCH_HOME=home with the server declared as provider ``bench``; returns (cfg, pm)."""
    os.environ["ORCH_HOME"] = str(home)
    os.environ.update(plugin_env(builtins))
    from orchestrator import runtime
    from orchestrator.config import Config
    from orchestrator.plugin_host.plugins import load

    runtime.config.cache_clear()
    runtime.plugin_manager.cache_clear()
    cfg = Config.load()
    cfg.providers[PROVIDER] = provider_entry(url, max_concurrent)
    cfg.save()
    runtime.config.cache_clear()
    cfg = runtime.config()
    pm = load(cfg.section("plugins"), enabled=builtins, extra=[("bench_noop", noop_plugin())])
    runtime.litellm()  # the import (seconds) is paid before any timing
    return cfg, pm


def engine_wave(cfg, pm, runs: Path, models: list[str], *, max_steps: int = 20):
    """Build the wave `orch fanout` would run (WaveSpec as in orchestrator.testing.kit)."""
    from orchestrator.engine.ledger_sink import LedgerSink
    from orchestrator.engine.wave import Wave, WaveSpec
    from orchestrator.models.resolve import resolve_all

    resolved = resolve_all([f"{PROVIDER}/{m}" for m in models], cfg, pm)
    spec = WaveSpec(models=resolved, briefing="Benchmark briefing: call noop, then answer.",
                    runs_dir=runs, max_steps=max_steps)
    return Wave(spec, pm=pm, config=cfg, ledger=LedgerSink())


# What orch's Server also tells litellm for a declared endpoint (orchestrator.models.server.
# litellm_prices): per-token prices, so litellm's calculator skips its price-map search.
PRICED = {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0}


async def bare_chain(lm, url: str, model: str, steps: int, **extra) -> int:
    """The physical limit: what any agent loop on litellm must do, and nothing else.

    Same requests as a leg (briefing, tool schema, assistant turn and tool result appended
    each step), same litellm arguments as orchestrator.models.server.Server but for the prices it
    passes for a declared endpoint (``extra=PRICED`` adds them: the bare loop as orch would
    write it, so a comparison against it is orch's own overhead and nothing else).
    """
    messages: list[dict] = [{"role": "user",
                             "content": "Benchmark briefing: call noop, then answer."}]
    for _ in range(steps):
        raw = await lm.acompletion(model=f"openai/{model}", messages=messages,
                                   tools=[TOOL_SCHEMA], api_base=url,
                                   api_key="sk-no-key-required", timeout=600.0,
                                   max_retries=0, num_retries=0, **extra)
        message = raw.choices[0].message
        if not message.tool_calls:
            return len(messages)
        messages.append({"role": "assistant", "content": message.content or None,
                         "tool_calls": [{"id": c.id, "type": "function",
                                         "function": {"name": c.function.name,
                                                      "arguments": c.function.arguments}}
                                        for c in message.tool_calls]})
        for c in message.tool_calls:
            messages.append({"role": "tool", "tool_call_id": c.id, "content": "ok"})
    return len(messages)


class PeakRSS:
    """High-water RSS above the starting RSS for one block (resets VmHWM via clear_refs)."""

    def __enter__(self):
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
        except OSError:
            pass
        self.start = rss_mb()
        return self

    def __exit__(self, *exc):
        self.delta_mb = max(0.0, peak_rss_mb() - self.start)
