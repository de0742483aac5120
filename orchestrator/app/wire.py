"""A prepared run as plain JSON, and back: what a client sends the daemon that runs it.

Everything the preparing process worked out travels: the resolved models, the briefing it
read (files, stdin, ``git diff`` in its own directory), absolute paths, its run id, the plan.
What belongs to a process is made again where the run runs: its plugin manager and config
(the daemon's match the client's: daemon/paths.py ``compat``), a bench's per-contestant
plugin managers. The key values never travel inside: the client sends them beside it,
exactly the declared ones (app/prepared.py). tests/test_app_requests.py holds that every
kind comes back equal."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from orchestrator.errors import OrchError

WIRE_VERSION = 1


def _path(value: Any) -> str | None:
    return None if value is None else str(value)


def _model(model) -> dict[str, Any]:
    return dataclasses.asdict(model)


def _unmodel(data: dict[str, Any]):
    from orchestrator.models.addressing import ResolvedModel

    return ResolvedModel(**data)


def _spec(spec) -> dict[str, Any]:
    if spec.anonymity is not None:
        raise OrchError("a wave with its own anonymity runs in the process that made it")
    return {"models": [_model(m) for m in spec.models], "briefing": spec.briefing,
            "runs_dir": _path(spec.runs_dir), "timeout_s": spec.timeout_s,
            "max_steps": spec.max_steps, "chair": _model(spec.chair) if spec.chair else None,
            "synthesis": spec.synthesis, "tag": spec.tag, "project_dir": spec.project_dir, "workspace": _path(spec.workspace),
            "kind": spec.kind, "retry_of": spec.retry_of, "run_id": spec.run_id,
            "wave_id": spec.wave_id, "options": spec.options, "briefings": spec.briefings,
            "histories": spec.histories, "prior": [r.to_dict() for r in spec.prior],
            "later": [_model(m) for m in spec.later],
            "chair_only_if_new": spec.chair_only_if_new,
            "parent_wave_id": spec.parent_wave_id}


def _unspec(data: dict[str, Any]):
    from orchestrator.engine.record import LegRecord
    from orchestrator.engine.spec import WaveSpec

    return WaveSpec(models=[_unmodel(m) for m in data["models"]], briefing=data["briefing"],
                    runs_dir=Path(data["runs_dir"]), timeout_s=data["timeout_s"],
                    max_steps=data["max_steps"],
                    chair=_unmodel(data["chair"]) if data["chair"] else None,
                    synthesis=data.get("synthesis") or "plain", tag=data["tag"],
                    project_dir=data["project_dir"],
                    workspace=Path(data["workspace"]) if data["workspace"] else None,
                    kind=data["kind"], retry_of=data["retry_of"], run_id=data["run_id"],
                    wave_id=data["wave_id"], options=data["options"],
                    briefings=data["briefings"], histories=data["histories"],
                    prior=[LegRecord.from_dict(r) for r in data["prior"]],
                    later=[_unmodel(m) for m in data["later"]],
                    chair_only_if_new=data["chair_only_if_new"],
                    parent_wave_id=data.get("parent_wave_id"))


def _council(plan) -> dict[str, Any]:
    p = plan.plan
    return {"seats": [_model(m) for m in p.seats], "chair": _model(p.chair),
            "briefing": p.briefing, "context": p.context, "notices": p.notices,
            "runs_dir": _path(plan.runs_dir), "timeout_s": plan.timeout_s,
            "max_steps": plan.max_steps, "tag": plan.tag, "project_dir": plan.project_dir,
            "workspace": _path(plan.workspace), "options": plan.options}


def _uncouncil(data: dict[str, Any]):
    from orchestrator.app.council import CouncilPlan
    from orchestrator.council.preflight import Plan

    plan = Plan(seats=[_unmodel(m) for m in data["seats"]], chair=_unmodel(data["chair"]),
                briefing=data["briefing"], context=data["context"], notices=data["notices"])
    return CouncilPlan(plan=plan, runs_dir=Path(data["runs_dir"]), timeout_s=data["timeout_s"],
                       max_steps=data["max_steps"], tag=data["tag"],
                       project_dir=data["project_dir"],
                       workspace=Path(data["workspace"]) if data["workspace"] else None,
                       options=data["options"])


def _bench(bench) -> dict[str, Any]:
    plan = bench.plan
    return {
        "plan": {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan)
                 if f.name not in ("contestants", "tasks")}
        | {"contestants": [dict(c.__dict__) for c in plan.contestants],
           "tasks": [{f.name: _path(getattr(t, f.name)) if f.name == "folder"
                      else getattr(t, f.name) for f in dataclasses.fields(t)}
                     for t in plan.tasks]},
        "bench_id": bench.bench_id, "path": _path(bench.path), "link": bench.link,
        "bwrap": bench.bwrap, "probe": bench.probe, "maxfail": bench.maxfail,
        "junit": _path(bench.junit), "previous": bench.previous,
        "again": None if bench.again is None else {str(n): w for n, w in bench.again.items()},
        "settle": bench.settle, "estimate": bench.estimate}


def _unbench(data: dict[str, Any]):
    from orchestrator.app.bench import BenchPlan, resolve
    from orchestrator.bakeoff.contestants import Contestant
    from orchestrator.bakeoff.plan import Plan
    from orchestrator.bakeoff.tasks import Task

    raw = dict(data["plan"])
    contestants = [Contestant(**c) for c in raw.pop("contestants")]
    tasks = [Task(**{**t, "folder": Path(t["folder"]) if t.get("folder") else None})
             for t in raw.pop("tasks")]
    plan = Plan(contestants=contestants, tasks=tasks, **raw)
    bench = BenchPlan(plan=plan, bench_id=data["bench_id"], path=Path(data["path"]),
                      link=data["link"], bwrap=data["bwrap"], probe=data["probe"],
                      maxfail=data["maxfail"],
                      junit=Path(data["junit"]) if data["junit"] else None,
                      previous=data["previous"],
                      again=None if data["again"] is None else {
                          int(n): w for n, w in data["again"].items()},
                      settle=data["settle"], estimate=data["estimate"])
    bench.resolved, bench.pms = resolve(plan)  # this process's plugin managers
    return bench


def _request(request) -> dict[str, Any]:
    return {"kind": request.kind, **dataclasses.asdict(request)}


def _unrequest(data: dict[str, Any]):
    from orchestrator.app import requests

    kinds = {cls.kind: cls for cls in (requests.Fanout, requests.Retry, requests.Continue,
                                       requests.Council, requests.Bench, requests.BenchResume)}
    data = dict(data)
    cls = kinds[data.pop("kind")]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    out = {}
    for name, value in data.items():
        if name in fields:
            out[name] = tuple(value) if isinstance(value, list) else value
    return cls(**out)


PLANS = {"wave": (_spec, _unspec), "deliberation": (None, None), "council": (
    _council, _uncouncil), "bench": (_bench, _unbench)}


def to_wire(prepared) -> dict[str, Any]:
    if prepared.nothing is not None:
        raise OrchError("nothing to run: a prepared run with nothing to do is not sent")
    if prepared.kind == "deliberation":
        plan = {"spec": _spec(prepared.plan.spec), "rounds": prepared.plan.rounds,
                "peers": prepared.plan.peers}
    else:
        plan = PLANS[prepared.kind][0](prepared.plan)
    return {"version": WIRE_VERSION, "kind": prepared.kind, "run_id": prepared.run_id,
            "request": _request(prepared.request),
            "models": [_model(m) for m in prepared.models],
            "key_vars": sorted(prepared.key_vars),
            "settings": sorted(prepared.keys.settings),
            "account": dataclasses.asdict(prepared.account), "notices": prepared.notices,
            "watch_text": prepared.watch_text, "plan": plan}


def from_wire(data: dict[str, Any], keys: dict[str, str] | None = None):
    """The prepared run ``data`` describes, with this process's plugin manager and config;
    ``keys``: the values its client sent (only the declared names are kept)."""
    from orchestrator import runtime
    from orchestrator.app.prepared import Allowance, Prepared
    from orchestrator.keys import RunKeys

    if data.get("version") != WIRE_VERSION:
        raise OrchError(f"a prepared run of wire version {data.get('version')} (this orch "
                        f"reads {WIRE_VERSION}); run it with the same orch")
    kind = data["kind"]
    if kind == "deliberation":
        from orchestrator.app.wave import DeliberationPlan

        raw = data["plan"]
        plan = DeliberationPlan(_unspec(raw["spec"]), raw["rounds"], raw["peers"])
        plugins = plan.spec.options.get("plugins", True)
    else:
        plan = PLANS[kind][1](data["plan"])
        options = getattr(plan, "options", None) or {}
        plugins = options.get("plugins", True) if kind != "bench" else True
    declared = frozenset(data["key_vars"])
    values = {k: v for k, v in (keys or {}).items() if k in declared}
    return Prepared(request=_unrequest(data["request"]), kind=kind, run_id=data["run_id"],
                    models=[_unmodel(m) for m in data["models"]], key_vars=declared,
                    account=Allowance(**data["account"]), plan=plan,
                    keys=RunKeys(values, declared, settings=data.get("settings") or ()),
                    notices=list(data["notices"]), watch_text=bool(data.get("watch_text")),
                    pm=runtime.plugin_manager(enabled=plugins), config=runtime.config())
