"""Run a wave or a leg in-process against the scripted server: a plugin author's test is a few
lines. The pytest fixtures in :mod:`orchestrator.testing.pytest_plugin` hand you an
:class:`OrchKit`."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.testing.scripted_server import RecordedRequest, ScriptedServer

OFFLINE_ENV = {
    "LITELLM_OFFLINE_MODE": "true",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_MODE": "PRODUCTION",
}


class _Watcher:
    """A leg observer that watches the text as it arrives (``run_wave(streamed=True)``)."""

    wants_text = True

    def __init__(self) -> None:
        self.texts: list[tuple[str, str]] = []

    def __call__(self, ctx) -> None:
        pass

    def text(self, ctx, text: str) -> None:
        self.texts.append((ctx.record.leg_id, text))


@dataclass
class WaveRun:
    """What a wave did: its document, each leg's metadata, and the requests on the wire."""

    doc: dict[str, Any]
    requests: list[RecordedRequest]
    runs_dir: Path
    texts: list[tuple[str, str]] = field(default_factory=list)  # (leg_id, piece), streamed

    @property
    def legs(self) -> list[dict[str, Any]]:
        return self.doc["legs"]

    @property
    def leg(self) -> dict[str, Any]:
        """The first (often only) leg's record."""
        return self.doc["legs"][0]

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies that reached the server, oldest first."""
        return [r.body for r in self.requests]

    def leg_dir(self, n: int = 1) -> Path:
        """Leg ``n``'s folder (1-based, in the order of ``models``): ``metadata.json``,
        ``conversation.jsonl`` and whatever a plugin wrote there."""
        return self.runs_dir / self.legs[n - 1]["leg_id"]

    def record(self, n: int = 1) -> dict[str, Any]:
        """Leg ``n``'s record as written to its ``metadata.json``."""
        import json

        return json.loads((self.leg_dir(n) / "metadata.json").read_text())

    def conversation(self, n: int = 1) -> list[dict[str, Any]]:
        import json

        path = self.leg_dir(n) / "conversation.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]


def named_plugin(plugin: object) -> tuple[str, object]:
    """``(name, plugin)`` for a plugin given bare: its ``NAME``, else the name of the installed
    entry point that points at it, else its module name without an ``orch_`` prefix."""
    if isinstance(plugin, tuple):
        return plugin
    from orchestrator.plugin_host.plugins import declared_name, module_name

    name = declared_name(plugin)
    if name:
        return name, plugin
    module = module_name(plugin)
    from importlib import metadata

    for ep in metadata.entry_points(group="orch"):
        if ep.value == module:
            return ep.name, plugin
    return module.rsplit(".", 1)[-1].removeprefix("orch_"), plugin


@dataclass
class OrchKit:
    home: Path
    server: ScriptedServer
    provider_name: str = "scripted"
    _declared: bool = field(default=False, repr=False)

    def provider(self, name: str | None = None, **extra: Any) -> str:
        """Declare the scripted server as provider ``name`` (default ``scripted``) in config;
        pass ``input_cost_per_mtok``/``output_cost_per_mtok`` to price it."""
        from orchestrator import runtime
        from orchestrator.config import Config

        name = name or self.provider_name
        cfg = Config.load()
        cfg.providers[name] = {"base_url": self.server.url, **extra}
        cfg.save()
        runtime.config.cache_clear()
        self._declared = True
        return name

    def config(self, **sections: Any) -> None:
        """Merge sections into config.json (e.g. ``plugin_config={"tiers": {...}}``)."""
        from orchestrator import runtime
        from orchestrator.config import Config

        cfg = Config.load()
        for key, value in sections.items():
            if isinstance(value, dict):
                cfg.section(key).update(value)
            else:
                cfg.data[key] = value
        cfg.save()
        runtime.config.cache_clear()

    def run_wave(self, models: list[str] | str, prompt: str = "Say hello.", *,
                 plugins: list[object] | None = None, builtins: bool = True,
                 all_installed: bool = False, chair: str | None = None,
                 streamed: bool = False, **spec: Any) -> WaveRun:
        """Run one wave in this process. ``models`` are model names on the scripted provider
        (``"m1"``) or full names (``"other/m1"``).

        Isolated by default: orch's built-ins and the ``plugins`` passed here (modules, or
        ``(name, plugin)`` pairs) load, no other installed plugin, so a test's result does not
        depend on its neighbours. ``all_installed=True`` loads every installed plugin too;
        ``builtins=False`` loads none but ``plugins``. ``streamed=True``: the legs' text is
        watched as it arrives (as ``orch ui`` or a single-answer terminal do), so legs ask for
        a stream; ``WaveRun.texts`` holds the pieces."""
        import anyio

        from orchestrator import runtime
        from orchestrator.engine.ledger_sink import LedgerSink
        from orchestrator.engine.wave import Wave, WaveSpec
        from orchestrator.models.resolve import resolve_all
        from orchestrator.plugin_host.plugins import load

        if not self._declared:
            self.provider()
        names = [models] if isinstance(models, str) else list(models)
        names = [n if "/" in n else f"{self.provider_name}/{n}" for n in names]
        cfg = runtime.config()
        pm = load(cfg.section("plugins"), enabled=builtins, third_party=all_installed,
                  extra=[named_plugin(p) for p in plugins or []])
        resolved = resolve_all(names, cfg, pm)
        chair_model = resolve_all([chair if "/" in chair else f"{self.provider_name}/{chair}"],
                                  cfg, pm)[0] if chair else None
        runs = self.home / "runs"
        before = len(self.server.requests)
        wave_spec = WaveSpec(models=resolved, briefing=prompt, runs_dir=runs, chair=chair_model,
                             **spec)
        watcher = _Watcher() if streamed else None
        wave = Wave(wave_spec, pm=pm, config=cfg, ledger=LedgerSink(), observe=watcher)
        doc = anyio.run(wave.run)
        return WaveRun(doc=doc, requests=self.server.requests[before:], runs_dir=runs,
                       texts=watcher.texts if watcher else [])

    def mcp_tools(self, *, plugins: list[object] | None = None, builtins: bool = True,
                  all_installed: bool = False) -> dict[str, dict[str, Any]]:
        """``orch mcp``'s tools as the plugins extend them: ``{tool: {"description",
        "inputSchema", ...}}``, the plugins chosen as ``run_wave`` chooses them (isolated by
        default). ``mcp_tools(plugins=[mine])["fanout"]["inputSchema"]["properties"]``
        holds your declared options as an MCP client sees them."""
        from orchestrator import runtime
        from orchestrator.mcp_server.schemas import CORE_ARGUMENTS, with_options
        from orchestrator.plugin_host.declared import declared_options
        from orchestrator.plugin_host.plugins import load

        pm = load(runtime.config().section("plugins"), enabled=builtins,
                  third_party=all_installed, extra=[named_plugin(p) for p in plugins or []])
        return with_options({name: declared_options(pm, name) for name in CORE_ARGUMENTS})

    def run_leg(self, model: str, prompt: str = "Say hello.", **kwargs: Any) -> WaveRun:
        """A one-leg wave; ``.leg`` is its record, ``.bodies`` what it sent."""
        return self.run_wave([model], prompt, **kwargs)

    # -- the other modes: each through the app's own prepare and start ----------------------
    def _names(self, models: list[str] | str) -> str:
        names = [models] if isinstance(models, str) else list(models)
        return ",".join(n if "/" in n else f"{self.provider_name}/{n}" for n in names)

    def _drive(self, request: Any, plugins: list[object] | None, builtins: bool,
               all_installed: bool) -> tuple[Any, list[Any], list[RecordedRequest]]:
        """``request`` prepared and run as every face runs it (orchestrator/app), with the
        plugins chosen as ``run_wave`` chooses them; (handle, events, requests sent)."""
        import anyio

        from orchestrator import runtime
        from orchestrator.app.prepare import prepare
        from orchestrator.app.start import start
        from orchestrator.plugin_host.chosen import Choice, choosing

        if not self._declared:
            self.provider()
        choice = Choice(extra=tuple(named_plugin(p) for p in plugins or []),
                        builtins=builtins, third_party=all_installed)
        before, events = len(self.server.requests), []
        runtime.plugin_manager.cache_clear()  # none built under another choice is reused
        try:
            with choosing(choice):
                handle = start(prepare(request))
                anyio.run(handle.drive, events.append)
        finally:
            runtime.plugin_manager.cache_clear()
        return handle, events, self.server.requests[before:]

    def run_council(self, seats: list[str], prompt: str = "Review this change.", *,
                    chair: str = "chair", plugins: list[object] | None = None,
                    builtins: bool = True, all_installed: bool = False,
                    options: dict[str, Any] | None = None, **request: Any):
        """Run a council (reviews, anonymous judging, tally, chair) in this process, as
        ``orch council run`` does: ``seats`` and ``chair`` are models on the scripted
        provider (script them with :func:`~orchestrator.testing.council_kit.council_seat`
        and :func:`~orchestrator.testing.council_kit.council_chair`); ``options``: plugins'
        declared options (``{"max_words": 5}``); other keywords are ``Council`` request
        fields (``tools``, ``max_steps``, ``diff``, ...). Returns a ``CouncilResult``."""
        from orchestrator.app.requests import Council
        from orchestrator.testing.council_kit import CouncilResult

        fields = {"tools": "none", "validate_models": False, "quiet": True, **request}
        req = Council(prompt=prompt, models=self._names(seats), chair=self._names(chair),
                      runs_dir=str(self.home / "runs"), budgets=dict(options or {}), **fields)
        handle, events, sent = self._drive(req, plugins, builtins, all_installed)
        return CouncilResult(doc=handle.document or {}, requests=sent, events=events,
                             extra=handle.extra)

    def run_deliberation(self, models: list[str], prompt: str = "Say hello.", *,
                         rounds: int = 2, peers: int | None = None, chair: str | None = None,
                         plugins: list[object] | None = None, builtins: bool = True,
                         all_installed: bool = False, options: dict[str, Any] | None = None,
                         **request: Any):
        """Run a deliberation (``orch fanout --rounds N``) in this process: round 1 a fanout,
        each later round every leg reading its peers (script them with
        :func:`~orchestrator.testing.deliberation_kit.deliberator`). Other keywords are
        ``Fanout`` request fields. Returns a ``DeliberationResult``."""
        from orchestrator.app.requests import fanout
        from orchestrator.testing.deliberation_kit import DeliberationResult

        fields = {"tools": "none", "validate_models": False, "quiet": True, **request}
        req = fanout(prompt=prompt, models=self._names(models), rounds=rounds, peers=peers,
                     chair=self._names(chair) if chair else None,
                     runs_dir=str(self.home / "runs"), budgets=dict(options or {}), **fields)
        handle, events, sent = self._drive(req, plugins, builtins, all_installed)
        return DeliberationResult(doc=handle.document or {}, requests=sent, events=events)

    def run_bench(self, config: Path | str, *, plugins: list[object] | None = None,
                  builtins: bool = True, all_installed: bool = False,
                  ceilings: dict[str, float] | None = None, **request: Any):
        """Run the bench file ``config`` in this process, as ``orch bench --config`` does
        (``ceilings``: its run ceilings, ``{"max_cost": 1.0}``; other keywords are ``Bench``
        request fields). Returns a ``BenchResult``."""
        from orchestrator.app.requests import Bench
        from orchestrator.testing.bench_kit import BenchResult

        config = Path(config)
        out = config.with_name(f"{config.stem}-results.json")
        req = Bench(config_path=str(config), out=str(out), ceilings=dict(ceilings or {}),
                    quiet=True, **request)
        handle, events, sent = self._drive(req, plugins, builtins, all_installed)
        return BenchResult(doc=handle.document or {}, path=out, requests=sent, events=events,
                           exit_code=handle.exit_code or 0)

    def run_trial(self, model: str | dict[str, Any], task: str, *,
                  expect: dict[str, Any] | None = None, verify: str | None = None,
                  trials: int = 1, plugins: list[object] | None = None, **kwargs: Any):
        """One bench task for one contestant, through the bench's trial skeleton and its
        check: ``model`` a model on the scripted provider (``"m"``) or a contestant table
        (``{"kind": "fanout", "models": [...], "aggregate": "vote"}``); ``expect`` the
        task's check (``{"contains": "42"}``, ``regex``, ``equals``, ...) or ``verify`` a
        command. Returns a ``BenchResult``; ``.trial`` is the row, ``.passed`` its verdict."""
        from orchestrator.testing.bench_kit import write_bench

        if isinstance(model, str):
            contestant: dict[str, Any] = {"name": model, "model": self._names(model),
                                          "tools": "none"}
        else:
            contestant = {"name": "contestant", **model}
            for key in ("models", "chair"):
                if key in contestant:
                    named = self._names(contestant[key]).split(",")
                    contestant[key] = named if key == "models" else named[0]
            if "model" in contestant:
                contestant["model"] = self._names(contestant["model"])
        check = {"verify": verify} if verify else {"expect": expect or {"contains": ""}}
        folder = Path(tempfile.mkdtemp(prefix="trial-", dir=self.home))
        path = write_bench(folder, [{"id": "task", "task": task, **check}], [contestant],
                           trials=trials)
        return self.run_bench(path, plugins=plugins, **kwargs)
