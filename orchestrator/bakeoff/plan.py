"""A bench's plan: ``bench.toml`` merged with the command line, and the spend estimate.

The plan is everything a run needs and everything a report must print for publishing: the
contestants, the tasks, the settings and the hash of the prompt template.
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.bakeoff.contestants import Contestant, check_unique, parse_contestant
from orchestrator.bakeoff.guard import CHECK_MEMORY_MB, CHECK_TIMEOUT_S
from orchestrator.bakeoff.tasks import SUITES_DIR, Task, load_tasks, suite_dir
from orchestrator.errors import OrchError, UsageProblem

DEFAULT_PROMPT = "{task}"
DEFAULT_TRIALS, DEFAULT_JOBS, DEFAULT_TIMEOUT_S = 3, 8, 600.0
EST_OUTPUT_TOKENS = 1024  # per trial, for the estimate only
EST_TOOL_ROUNDS = 2  # a reading model sends the files back about this many times
BENCH_KEYS = ("builtin", "cases", "trials", "jobs", "timeout_s", "prompt")
CHECK_KEYS = ("check_timeout_s", "check_memory_mb", "readable")
# [bench] also takes each run ceiling a plugin declares (the cost_ceiling plugin's:
# ``max_cost``), passed in as ``ceiling_keys``: the bench file names it by the option's key

STARTER = '''# orch bench --config bench.toml  (docs/bench.md)
[bench]
builtin = "reading"        # or: cases = "my-tasks"  (a folder of TOML/JSON task files)
trials = 3                 # trials per task and contestant; 3 or more for honest intervals
jobs = 8                   # model trials at once (the rate gate still applies)
timeout_s = 600            # per trial
prompt = "{task}"          # the template every contestant gets; {verify} would leak the check
# max_cost = 2.00          # dollars, for the whole bench (the cost-ceiling guard)
# check_timeout_s = 60     # each hidden check's limit (a task's check_timeout_s wins)
# check_memory_mb = 2048   # each check's memory limit

# The first contestant is the baseline every other one is compared with.
[[contestants]]
name = "baseline"
kind = "model"
model = "openai/gpt-4o-mini"

[[contestants]]
name = "challenger"
kind = "model"
model = "anthropic/claude-haiku-4-5"
# tier = "minimal"  tools = "read"  max_steps = 20  disable_plugins = []  note = ""

# Does fanning out beat the best single model? (kind = "council" runs a council per trial)
# [[contestants]]
# name = "both"
# kind = "fanout"
# models = ["openai/gpt-4o-mini", "anthropic/claude-haiku-4-5"]
# chair = "openai/gpt-4o"    # optional; without it a trial passes when any member passes
# rounds = 3                 # optional: deliberate (docs/deliberation.md); peers = 2

# An agent CLI, run in the trial folder:
# [[contestants]]
# name = "claude-code"
# kind = "command"
# command = "claude"
# args = ["-p", "{task}", "--output-format", "json"]
# stdin = false
# parse = "claude-json"     # none | claude-json | codex-jsonl | orch-json
# timeout_s = 900
# network = true            # it runs confined (bubblewrap): no network unless this says so
# pass_env = ["ANTHROPIC_API_KEY"]  # no variable with a key reaches it unless named here
# writable = ["~/.claude"]  # folders it may write besides its trial folder
'''


@dataclass
class Plan:
    contestants: list[Contestant]
    tasks: list[Task]
    source: str
    trials: int = DEFAULT_TRIALS
    jobs: int = DEFAULT_JOBS
    timeout_s: float = DEFAULT_TIMEOUT_S
    prompt: str = DEFAULT_PROMPT
    # each declared run ceiling's key -> its dollars (None: not set) for the whole bench,
    # from its flag or the bench file (``max_cost``), held over every trial
    ceilings: dict[str, float | None] = field(default_factory=dict)
    config_path: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    check_timeout_s: float = CHECK_TIMEOUT_S  # a task's own check_timeout_s wins
    check_memory_mb: int = CHECK_MEMORY_MB
    readable: list[str] = field(default_factory=list)  # shown read-only inside the sandbox
    confinement: str = ""  # what ran untrusted programs: "bwrap", or none (--unsafe-checks)

    @property
    def needs_sandbox(self) -> bool:
        """Something untrusted runs as a program: a `verify` check or a command contestant."""
        return any(t.verify for t in self.tasks) or any(c.kind == "command"
                                                       for c in self.contestants)

    def guard(self, bwrap: str | None, *, unsafe: bool = False):
        """What runs the checks and command contestants (``unsafe``: --unsafe-checks was
        passed, which the results then say)."""
        from orchestrator.bakeoff.guard import Guard

        guard = Guard.of(bwrap, {"check_timeout_s": self.check_timeout_s,
                                 "check_memory_mb": self.check_memory_mb,
                                 "readable": self.readable})
        guard.secret, guard.unsafe = self.secrets, unsafe and bwrap is None
        self.confinement = guard.confinement
        return guard

    @property
    def secrets(self) -> tuple[Path, ...]:
        """What a contestant (or a check) must never see inside the sandbox: every task's
        folder (its checks and solutions) and the built-in suites."""
        return tuple(dict.fromkeys([*(t.folder for t in self.tasks if t.folder),
                                    SUITES_DIR]))

    @property
    def prompt_hash(self) -> str:
        return hashlib.sha256(self.prompt.encode()).hexdigest()[:16]

    def render(self, task: Task) -> str:
        return self.prompt.replace("{task}", task.text).replace("{verify}", task.check)

    def settings(self) -> dict[str, Any]:
        """What a published result must state."""
        return {"source": self.source, "trials": self.trials, "jobs": self.jobs,
                "timeout_s": self.timeout_s, "prompt": self.prompt,
                "prompt_sha256": self.prompt_hash, **self.ceilings,
                "config_path": self.config_path, "config": self.config,
                "check_timeout_s": self.check_timeout_s,
                "check_memory_mb": self.check_memory_mb, "readable": self.readable,
                "confinement": self.confinement,
                "contestants": [c.to_dict() for c in self.contestants],
                "tasks": [t.id for t in self.tasks]}


def read_config(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageProblem(f"config {path} does not exist; write one with `orch bench --init`") \
            from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise OrchError(f"config {path} cannot be read: {exc}; fix its TOML") from None


def build(*, config_path: Path | None, builtin: str | None, cases: Path | None,
          only: str | None, models: list[str] | None, trials: int | None, jobs: int | None,
          timeout_s: float | None, ceilings: dict[str, float] | None = None,
          ceiling_keys: tuple[str, ...] = ()) -> Plan:
    """The plan: the config file's values, each overridden by its command-line flag.
    ``ceilings``: the run ceilings given as flags; ``ceiling_keys``: every declared one (the
    bench file may set each under its key)."""
    data = read_config(config_path) if config_path else {}
    bench = data.get("bench", {})
    if not isinstance(bench, dict):
        raise OrchError("config: [bench] must be a table")
    check_keys(bench, ceiling_keys)
    source, folder = task_folder(config_path, builtin, cases, data)
    tasks = load_tasks(folder)
    if only:
        wanted = [t.strip() for t in only.split(",") if t.strip()]
        unknown = sorted(set(wanted) - {t.id for t in tasks})
        if unknown:
            raise OrchError(f"--only names unknown task(s) {', '.join(unknown)}; known: "
                            f"{', '.join(t.id for t in tasks[:20])}")
        tasks = [t for t in tasks if t.id in wanted]
    if models:
        contestants = [Contestant(name=m, kind="model", model=m) for m in models]
    else:
        raw = data.get("contestants", [])
        if not isinstance(raw, list):
            raise OrchError("config: contestants are [[contestants]] tables")
        contestants = [parse_contestant(c, f"contestant {n}") for n, c in
                       enumerate(raw, start=1)]
    if not contestants:
        raise OrchError("no contestants: pass --models a,b or list [[contestants]] in "
                        "bench.toml (orch bench --init writes a starter)")
    check_unique(contestants)
    prompt = bench.get("prompt", DEFAULT_PROMPT)
    if not isinstance(prompt, str) or "{task}" not in prompt:
        raise OrchError("config: bench.prompt must contain {task}")
    plan = Plan(contestants=contestants, tasks=tasks, source=source, prompt=prompt,
                trials=_pick(trials, bench.get("trials"), DEFAULT_TRIALS, "trials", 1, 1000),
                jobs=_pick(jobs, bench.get("jobs"), DEFAULT_JOBS, "jobs", 1, 1024),
                timeout_s=float(_pick(timeout_s, bench.get("timeout_s"), DEFAULT_TIMEOUT_S,
                                      "timeout_s", 0.001, 86400)),
                ceilings={k: (ceilings or {}).get(k) if (ceilings or {}).get(k) is not None
                          else bench.get(k) for k in ceiling_keys},
                config_path=str(config_path) if config_path else None, config=data,
                **check_settings(bench, ceiling_keys))
    return plan


def check_keys(bench: dict[str, Any], ceiling_keys: tuple[str, ...] = ()) -> None:
    """A key ``[bench]`` does not know is refused, as a contestant's is: a typo
    (``trails = 5``) would otherwise run with the default, silently."""
    import difflib

    known = (*BENCH_KEYS, *ceiling_keys, *CHECK_KEYS)
    for key in bench:
        if key not in known:
            near = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {near[0]}?" if near else \
                f"known: {', '.join(known)}"
            raise OrchError(f"config: unknown key {key!r} in [bench]; {hint}")


def check_settings(bench: dict[str, Any], ceiling_keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """``[bench]``'s limits and sandbox settings for checks (a run and --selftest alike)."""
    check_keys(bench, ceiling_keys)
    readable = bench.get("readable", [])
    if not isinstance(readable, list) or not all(isinstance(v, str) and v for v in readable):
        raise OrchError("bench.readable must be a list of folder paths")
    return {"check_timeout_s": float(_pick(None, bench.get("check_timeout_s"), CHECK_TIMEOUT_S,
                                           "check_timeout_s", 0.001, 86400)),
            "check_memory_mb": int(_pick(None, bench.get("check_memory_mb"), CHECK_MEMORY_MB,
                                         "check_memory_mb", 16, 1 << 20)),
            "readable": list(readable)}


def task_folder(config_path: Path | None, builtin: str | None, cases: Path | None,
                data: dict[str, Any] | None = None) -> tuple[str, Path]:
    """(source label, folder) of the tasks: the flags, else the config's [bench] table."""
    if data is None:
        data = read_config(config_path) if config_path else {}
    bench = data.get("bench", {}) if isinstance(data.get("bench", {}), dict) else {}
    base = config_path.parent if config_path else Path.cwd()
    if builtin and cases:
        raise OrchError("pass either --builtin NAME or --cases DIR, not both")
    if not (builtin or cases):
        builtin = bench.get("builtin")
        cases = base / str(bench["cases"]) if bench.get("cases") else None
    if builtin:
        return f"builtin:{builtin}", suite_dir(str(builtin))
    if cases:
        return str(cases), Path(cases).expanduser()
    raise OrchError("no tasks: pass --builtin NAME (reading, format, adversarial, review) or "
                    "--cases DIR, or set them in bench.toml")


def _pick(flag, configured, default, key, low, high):
    value = flag if flag is not None else configured if configured is not None else default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise OrchError(f"bench.{key} must be a number from {low} to {high}")
    return value


# --- the estimate --------------------------------------------------------------------------

def estimate(plan: Plan, resolved: dict[str, Any]) -> dict[str, Any]:
    """contestants × tasks × trials × estimated tokens × price, naming unknown prices."""
    from orchestrator.models.catalog import prices
    from orchestrator.models.estimate import estimate_text

    per_contestant, unknown, total = {}, [], 0.0
    for c in plan.contestants:
        model = resolved.get(c.name)
        if model is None:  # a command contestant: its cost is whatever it reports
            unknown.append(f"{c.name} (a command; cost as reported)")
            continue
        tokens_in = 0
        for task in plan.tasks:
            files = "\n".join(task.files.values()) if c.tools == "read" else ""
            tokens_in += estimate_text(plan.render(task), exact=False) + \
                EST_TOOL_ROUNDS * estimate_text(files, exact=False)
        tokens_in *= plan.trials
        tokens_out = EST_OUTPUT_TOKENS * len(plan.tasks) * plan.trials
        models = list(getattr(model, "requests", [model]))  # an ensemble: each request
        tokens_in, tokens_out = tokens_in * len(models), tokens_out * len(models)
        found = [prices(m) for m in models]
        cost = None if any(p is None for p in found) else sum(
            tokens_in / len(models) * p[0] + tokens_out / len(models) * p[1] for p in found)
        if cost is None:
            unknown.append(f"{c.name} ({model.name}: no known price)")
        else:
            total += cost
        per_contestant[c.name] = {"input_tokens": tokens_in, "output_tokens": tokens_out,
                                  "cost_usd": cost}
    return {"trials": len(plan.contestants) * len(plan.tasks) * plan.trials,
            "contestants": per_contestant, "cost_usd": total, "unknown": unknown}


def describe_estimate(est: dict[str, Any]) -> str:
    lines = [f"estimate: {est['trials']} trials, about ${est['cost_usd']:.4f}"]
    for name, e in est["contestants"].items():
        cost = "unknown" if e["cost_usd"] is None else f"${e['cost_usd']:.4f}"
        lines.append(f"  {name}: ~{e['input_tokens']:,} in + {e['output_tokens']:,} out "
                     f"tokens, {cost}")
    if est["unknown"]:
        lines.append("  not in the total: " + "; ".join(est["unknown"]))
    return "\n".join(lines)
