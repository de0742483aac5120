"""Preparing a bench (``orch bench``) and its resume (``orch bench resume``): the plan from
the bench file and the flags, each contestant resolved, every check before spend (keys,
commands on PATH, the sandbox, the output files), the bench's id, where its results go and
the spend estimate a face confirms. The run itself is app/bench_run.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.app.requests import Bench, BenchResume
from orchestrator.errors import OrchError, UsageProblem

PROBE_TASK = {"id": "probe", "task": "Reply with the single word PONG and nothing else.",
              "files": {"README.md": "This folder is a probe of orch bench.\n"},
              "expect": {"contains": ["PONG"]}, "solution": "PONG"}
RUNNING = "running"  # a partial results file's marker: the process still writing it


@dataclass
class BenchPlan:
    """What a bench run is: the plan, its id and results file, the sandbox it runs its
    checks and commands in, and for a resume what the earlier run left."""

    plan: Any  # bakeoff.plan.Plan
    bench_id: str
    path: Path  # the results file
    link: bool = False  # --out: `orch runs` finds the results through ORCH_HOME/bench's link
    bwrap: str | None = None  # bubblewrap's path, or None (not needed, or --unsafe-checks)
    probe: bool = False
    maxfail: int | None = None
    junit: Path | None = None
    previous: dict[str, Any] | None = None  # a resume: the results so far
    again: dict[int, str] | None = None  # a resume: slot -> why it runs again
    settle: bool = False  # a resume of a killed run: grade what it was billed for first
    estimate: dict[str, Any] = field(default_factory=dict)
    resolved: dict[str, Any] = field(default_factory=dict)  # contestant -> model(s)
    pms: dict[str, Any] = field(default_factory=dict)  # contestant -> plugin manager (local)


def ceiling_keys() -> tuple[str, ...]:
    """The run ceilings a bench file (``[bench] max_cost``) and a results file may hold: the
    plugins' declared ones, loaded or disabled (a disabled plugin's is refused, not unknown)."""
    from orchestrator import runtime
    from orchestrator.budget_guards import declarations

    return tuple(dict.fromkeys(o.key for _, o in declarations(runtime.plugin_manager(),
                                                              command="bench")
                               if o.run_ceiling))


def build_plan(request: Bench):
    """The plan of ``request``: the bench file merged with its values (a probe: one tiny
    task per contestant)."""
    from orchestrator.bakeoff import plan as plan_mod
    from orchestrator.bakeoff import tasks as tasks_mod

    models = list(request.models) if request.models is not None else None
    if models is not None and not all(m.strip() for m in models):
        raise UsageProblem("--models has an empty entry; pass a,b,c")
    plan = plan_mod.build(config_path=Path(request.config_path) if request.config_path else None,
                          builtin=request.builtin,
                          cases=Path(request.cases) if request.cases else None,
                          only=request.only, models=[m.strip() for m in models] if models
                          else None, trials=request.trials, jobs=request.jobs,
                          timeout_s=request.timeout_s, ceilings=dict(request.ceilings),
                          ceiling_keys=ceiling_keys())
    if request.probe:
        plan.tasks = [tasks_mod.load_task_data(PROBE_TASK)]
        plan.trials, plan.source = 1, "probe"
    return plan


def resolve(plan) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each model contestant's model and plugin manager (its disable_plugins, its tier pin)."""
    from orchestrator import runtime
    from orchestrator.bakeoff.run import TierPin
    from orchestrator.budget_guards import require_guards
    from orchestrator.models.resolve import resolve_all
    from orchestrator.notices import warn as stderr_warn
    from orchestrator.plugin_host.fail_closed import require_loaded
    from orchestrator.plugin_host.plugins import load

    cfg = runtime.config()
    resolved, pms = {}, {}
    base = cfg.section("plugins")
    for c in plan.contestants:
        if c.kind == "command":
            continue
        section = {**base, "disabled": [*base.get("disabled", []), *c.disable_plugins]}
        pms[c.name] = load(section, warn=stderr_warn, extra=[("bench_tier", TierPin())])
        require_loaded(pms[c.name], cfg)  # a guard that cannot load: nothing is sent
        # a ceiling from its flag or the bench file holds for every contestant, or none runs
        require_guards(plan.ceilings, pms[c.name], cfg, command="bench",
                       source=lambda key, name=c.name: _ceiling_source(plan, name, key))
        if c.kind in ("fanout", "council"):
            from orchestrator.bakeoff.ensemble import Ensemble

            found = resolve_all([*c.models, *([c.chair] if c.chair else [])], cfg,
                                pms[c.name])
            resolved[c.name] = Ensemble(members=found[:len(c.models)],
                                        chair=found[-1] if c.chair else None, kind=c.kind,
                                        rounds=c.rounds, aggregate=c.aggregate)
        else:
            resolved[c.name] = resolve_all([c.model], cfg, pms[c.name])[0]
    return resolved, pms


def models_of(resolved_one: Any) -> list[Any]:
    """The resolved models behind a contestant (an ensemble has several)."""
    return list(getattr(resolved_one, "models", [resolved_one]))


def _ceiling_source(plan, contestant: str, key: str) -> str:
    """Where the bench's ceiling ``key`` was asked for: its key in the bench file, else its
    flag."""
    from orchestrator.budget_guards import flag

    in_file = (plan.config.get("bench") or {}).get(key)
    where = f"{key} in {plan.config_path}" if in_file is not None and \
        in_file == plan.ceilings.get(key) else flag(key)
    return f"{where} (contestant {contestant})"


def choose_sandbox(needed: bool, unsafe: bool) -> tuple[str | None, str | None]:
    """(bwrap's path or None, the notice to say): refuses when it is needed and cannot run,
    unless ``unsafe`` (then said once)."""
    from orchestrator.bakeoff.guard import UNSAFE_FLAG, choose

    path = choose(needed=needed, unsafe=unsafe)
    notice = (f"{UNSAFE_FLAG}: verify checks and command contestants run without bubblewrap "
              "(a scrubbed environment and resource limits only)") if unsafe and needed else None
    return path, notice


def check_runnable(plan, resolved: dict[str, Any]) -> None:
    """Every model's key is set and every command is on PATH: before any spend, one line."""
    from orchestrator.bakeoff import contestants as cmd
    from orchestrator.models.addressing import check_key

    for c in plan.contestants:
        if c.kind != "command":
            for model in models_of(resolved[c.name]):
                check_key(model)
        elif not cmd.found(c):
            raise OrchError(f"contestant {c.name}: {c.command} is not on PATH; install it or "
                            "give its full path (orch bench --check lists every contestant)")


def load_results(file: Path) -> dict[str, Any]:
    """A results file, or one line saying why not."""
    from orchestrator.store import read_json

    try:
        doc = read_json(file)
        if not isinstance(doc, dict) or "trials" not in doc or "settings" not in doc:
            raise ValueError("not an orch bench results file")
    except FileNotFoundError:
        raise UsageProblem(f"{file} does not exist; pass a results file from ORCH_HOME/bench/") \
            from None
    except (OSError, ValueError) as exc:
        raise OrchError(f"{file} cannot be read as bench results: {exc}") from None
    return doc


def prepare_bench(request: Bench | BenchResume):
    """A bench or a resume, prepared: nothing is sent and no results file is written yet."""
    from orchestrator import config as config_mod
    from orchestrator import runtime
    from orchestrator.app.prepared import Allowance, Prepared
    from orchestrator.bakeoff.plan import estimate

    notices: list[str] = []
    if isinstance(request, BenchResume):
        bench = _resume(request)
        if bench is None or isinstance(bench, str):
            return Prepared(request=request, kind="bench", run_id="", models=[],
                            key_vars=frozenset(), account=Allowance(run_id=""), plan=None,
                            nothing=bench or "nothing to run")
    else:
        from orchestrator.bakeoff.run import new_bench_id

        plan = build_plan(request)
        bench_id = new_bench_id()
        out = Path(request.out).expanduser() if request.out else None
        path = (out or config_mod.home() / "bench" / f"{bench_id}.json").absolute()
        bench = BenchPlan(plan=plan, bench_id=bench_id, path=path, link=out is not None,
                          probe=request.probe)
    plan = bench.plan
    _absolute(plan)
    bench.resolved, bench.pms = resolve(plan)
    check_runnable(plan, bench.resolved)
    bench.bwrap, notice = choose_sandbox(plan.needs_sandbox, request.unsafe_checks)
    notices += [notice] if notice else []
    bench.junit = Path(request.junit_xml).absolute() if request.junit_xml else None
    if bench.junit is not None and bench.junit.is_dir():
        raise UsageProblem(f"--junit-xml {request.junit_xml} is a directory; pass a file name")
    if bench.path.exists() and bench.path.is_dir():
        raise UsageProblem(f"--out {bench.path} is a directory; pass a file name")
    bench.maxfail = request.maxfail
    bench.estimate = estimate(plan, bench.resolved)
    models = [m for r in bench.resolved.values() for m in models_of(r)]
    names, unfit = _variables(plan, models)
    return Prepared(request=request, kind="bench", run_id=bench.bench_id, models=models,
                    key_vars=names, account=Allowance(run_id=bench.bench_id, ceilings={
                        k: v for k, v in plan.ceilings.items() if v is not None}),
                    plan=bench, keys=_capture(names), notices=notices,
                    unfit_for_daemon=unfit, pm=runtime.plugin_manager(),
                    config=runtime.config())


def _absolute(plan) -> None:
    """The paths a run reads, made absolute where the bench is prepared (the process that
    runs it may stand anywhere): task folders, ``[bench] readable``, each command's
    ``writable`` folders."""
    plan.readable = [str(Path(p).expanduser().absolute()) for p in plan.readable]
    for task in plan.tasks:
        if task.folder is not None:
            task.folder = Path(task.folder).absolute()
    for c in plan.contestants:
        c.writable = [str(Path(w).expanduser().absolute()) for w in c.writable]


def _variables(plan, models) -> tuple[frozenset[str], str | None]:
    """The models' keys, each contestant's plugins' declared variables, and for untrusted
    programs (a command contestant, a `verify` check) what they are given: the base
    variables and each command's ``pass_env``."""
    from orchestrator import runtime
    from orchestrator.app.declared import declared_variables
    from orchestrator.sandbox.environment import RUN_VARIABLES

    extra: list[str] = []
    if plan.needs_sandbox:
        extra += RUN_VARIABLES
    for c in plan.contestants:
        extra += list(getattr(c, "pass_env", None) or [])
    return declared_variables(models, runtime.plugin_manager(), extra)


def _capture(names):
    from orchestrator.app.declared import settings_among
    from orchestrator.keys import capture

    return capture(names, settings=settings_among(names))


def _resume(request: BenchResume) -> BenchPlan | str | None:
    """A resume's plan, or the line saying there is nothing to run."""
    from orchestrator.bakeoff import regrade, resume
    from orchestrator.pids import same_process

    file = Path(request.file).expanduser().absolute()
    doc = load_results(file)
    marker = doc.get(RUNNING) or {}
    if marker and same_process(marker.get("pid"), marker.get("pid_started")):
        raise OrchError(f"{request.file} is still being written by orch bench (pid "
                        f"{marker.get('pid')}); wait for it, or stop it first")
    plan = resume.plan_of(doc, file, ceiling_keys())
    plan.ceilings.update({k: v for k, v in request.ceilings.items() if v is not None})
    again = resume.todo(doc, resume.total(plan), failed=request.retry_failed,
                        excluded=request.retry_excluded)
    killed = regrade.killed_run(doc, resume.total(plan)) is not None
    if not again and not killed:
        return (f"nothing to run: every trial of {request.file} was graded"
                + ("" if request.retry_failed and request.retry_excluded else
                   " (--retry-failed, --retry-excluded run those again)"))
    return BenchPlan(plan=plan, bench_id=doc["bench_id"], path=file, previous=doc,
                     again=again, settle=killed)
