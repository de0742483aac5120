"""Contestants: orch models, and agent CLIs run as subprocesses in the trial folder.

A command contestant's usage and cost come from its own output through a ``parse``r; what
it reports is recorded as reported (cost source ``reported``), never priced by orch.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.errors import OrchError, PreflightError
from orchestrator.sandbox.process import Finished, Limits, Running, run

if TYPE_CHECKING:
    from orchestrator.bakeoff.guard import Guard

__all__ = ["Running"]  # an interrupt stops command trials and checks alike

KINDS = ("model", "command", "fanout", "council")
PARSERS = ("none", "claude-json", "codex-jsonl", "orch-json")
TOOLS = ("read", "none")
PARSE_TIMEOUT_S = 30.0  # a parser reading at most 8 MiB of output
PLACEHOLDERS = ("{task}", "{cwd}", "{model}", "{verify}")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@/:+-]{0,79}$")
_MODEL_KEYS = {"name", "kind", "model", "tier", "tools", "max_steps", "disable_plugins", "note"}
_FANOUT_KEYS = {"name", "kind", "models", "chair", "tier", "tools", "max_steps",
                "disable_plugins", "note"}
_DELIBERATION_KEYS = {"rounds", "peers"}  # a fanout's: docs/deliberation.md
AGGREGATES = ("vote",)  # a fanout's `aggregate`: votes/aggregate.py
MAX_ROUNDS = 20  # as `orch fanout --rounds`
_COMMAND_KEYS = {"name", "kind", "command", "args", "stdin", "env", "timeout_s", "parse",
                 "note", "model", "jobs", "network", "pass_env", "writable", "memory_mb"}


@dataclass
class Contestant:
    name: str
    kind: str
    model: str = ""
    tier: str | None = None
    tools: str = "read"
    max_steps: int = 20
    disable_plugins: list[str] = field(default_factory=list)
    note: str = ""
    command: str = ""
    args: list[str] = field(default_factory=list)
    stdin: bool = True
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float | None = None
    parse: str = "none"
    jobs: int = 1
    network: bool = False  # inside the sandbox: may it reach the network?
    pass_env: list[str] = field(default_factory=list)  # names whose values orch passes on
    writable: list[str] = field(default_factory=list)  # folders besides its trial folder
    memory_mb: int | None = None  # RLIMIT_DATA; none by default (agent runtimes vary)
    models: list[str] = field(default_factory=list)  # a fanout's members
    chair: str | None = None  # a fanout's chair: its answer is the trial's
    rounds: int = 1  # a fanout's: 2 or more deliberate (orchestrator/deliberation)
    peers: int | None = None  # a deliberation's peers per leg; None: its default
    aggregate: str | None = None  # a fanout's: "vote" grades the majority of its answers

    @property
    def deliberates(self) -> bool:
        return self.kind == "fanout" and self.rounds > 1

    def to_dict(self) -> dict[str, Any]:
        keys = _KEYS[self.kind]
        # env values may be keys: only their names are kept
        return {k: (sorted(v) if k == "env" else v) for k, v in self.__dict__.items()
                if k in keys}


def parse_contestant(data: Any, where: str) -> Contestant:
    if not isinstance(data, dict):
        raise OrchError(f"{where}: a contestant is a table with name and kind")
    name, kind = data.get("name"), data.get("kind", "command" if "command" in data else "model")
    if not isinstance(name, str) or not _NAME.match(name):
        raise OrchError(f"{where}: every contestant needs a `name` (letters, digits, ._@/:+-)")
    if kind not in KINDS:
        raise OrchError(f"{where} ({name}): `kind` is `model`, `command`, `fanout` or "
                        "`council`")
    if kind != "fanout" and _DELIBERATION_KEYS & set(data):
        raise PreflightError(f"{where} ({name}): `rounds` and `peers` apply to a fanout "
                             f"contestant, not a {kind} one; " + _DELIBERATE_FIX[kind])
    allowed = _KEYS[kind]
    if unknown := set(data) - allowed:
        raise OrchError(f"{where} ({name}): unknown key(s) {', '.join(sorted(unknown))} for a "
                        f"{kind} contestant; allowed: {', '.join(sorted(allowed))}")
    c = Contestant(name=name, kind=kind)
    try:
        if kind == "model":
            if not isinstance(data.get("model"), str) or not data["model"].strip():
                raise ValueError("`model` is required, e.g. openai/gpt-4o-mini")
            c.model = data["model"].strip()
            c.tier = data.get("tier")
            if c.tier not in (None, "minimal", "default"):
                raise ValueError("`tier` is minimal or default")
            c.tools = data.get("tools", "read")
            if c.tools not in TOOLS:
                raise ValueError("`tools` is read or none")
            c.max_steps = _int(data.get("max_steps", 20), "max_steps", 1, 200)
            c.disable_plugins = _strings(data.get("disable_plugins", []), "disable_plugins")
        elif kind in ("fanout", "council"):
            if kind == "council" and not data.get("chair"):
                raise ValueError("a council needs a `chair` (a model), e.g. openai/gpt-4o")
            c.models = _strings(data.get("models"), "models") if "models" in data else []
            if len(c.models) < 2 or not all(m.strip() for m in c.models):
                raise ValueError("`models` lists two or more models, e.g. "
                                 '["openai/gpt-4o-mini", "anthropic/claude-haiku-4-5"]')
            c.models = [m.strip() for m in c.models]
            chair = data.get("chair")
            if chair is not None and (not isinstance(chair, str) or not chair.strip()):
                raise ValueError("`chair` is a model, e.g. openai/gpt-4o")
            c.chair = chair.strip() if chair else None
            c.tier = data.get("tier")
            if c.tier not in (None, "minimal", "default"):
                raise ValueError("`tier` is minimal or default")
            c.tools = data.get("tools", "read")
            if c.tools not in TOOLS:
                raise ValueError("`tools` is read or none")
            c.max_steps = _int(data.get("max_steps", 20), "max_steps", 1, 200)
            c.disable_plugins = _strings(data.get("disable_plugins", []), "disable_plugins")
            if kind == "fanout":
                c.rounds, c.peers = _deliberation(data, len(c.models), f"{where} ({name})")
                c.aggregate = _aggregate(data, f"{where} ({name})")
        else:
            if not isinstance(data.get("command"), str) or not data["command"].strip():
                raise ValueError("`command` is required (the program to run)")
            c.command = data["command"]
            c.args = _strings(data.get("args", []), "args")
            c.stdin = bool(data.get("stdin", True))
            env = data.get("env", {})
            if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
                raise ValueError("`env` maps names to strings")
            c.env = dict(env)
            if data.get("timeout_s") is not None:
                c.timeout_s = float(data["timeout_s"])
                if not 0 < c.timeout_s < 1e6:
                    raise ValueError("`timeout_s` is a positive number of seconds")
            c.parse = data.get("parse", "none")
            if c.parse not in PARSERS:
                raise ValueError(f"`parse` is one of {', '.join(PARSERS)}")
            c.model = str(data.get("model", ""))
            c.jobs = _int(data.get("jobs", 1), "jobs", 1, 64)
            if not isinstance(data.get("network", False), bool):
                raise ValueError("`network` is true or false")
            c.network = data.get("network", False)
            c.pass_env = _strings(data.get("pass_env", []), "pass_env")
            c.writable = _strings(data.get("writable", []), "writable")
            if data.get("memory_mb") is not None:
                c.memory_mb = _int(data["memory_mb"], "memory_mb", 16, 1 << 20)
        c.note = str(data.get("note", ""))
    except (TypeError, ValueError) as exc:
        raise OrchError(f"{where} ({name}): {exc}") from None
    return c


_KEYS = {"model": _MODEL_KEYS, "command": _COMMAND_KEYS,
         "fanout": _FANOUT_KEYS | _DELIBERATION_KEYS | {"aggregate"}, "council": _FANOUT_KEYS}
_DELIBERATE_FIX = {
    "model": 'to deliberate, make it kind = "fanout" with models = ["m", "m", "m"] (a model '
             "may repeat) and rounds = 3",
    "council": "a council reviews and judges in its own stages: drop them, or use "
               'kind = "fanout" with rounds = 3',
    "command": "a command contestant runs its own program: drop them",
}


def _deliberation(data: dict[str, Any], legs: int, who: str) -> tuple[int, int | None]:
    """A fanout's ``rounds`` and ``peers``; a bad value is a usage error (exit 2) naming
    the fix."""
    rounds, peers = data.get("rounds", 1), data.get("peers")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or \
            not 1 <= rounds <= MAX_ROUNDS:
        raise PreflightError(f"{who}: `rounds` is a whole number from 1 to {MAX_ROUNDS} "
                             f"(1: one round, no deliberation), not {rounds!r}; e.g. "
                             "rounds = 3")
    if peers is None:
        return rounds, None
    if rounds == 1:
        raise PreflightError(f"{who}: `peers` applies to a deliberation; add rounds = N "
                             "(N >= 2), or drop peers")
    if isinstance(peers, bool) or not isinstance(peers, int) or not 1 <= peers <= legs - 1:
        raise PreflightError(f"{who}: `peers` is how many other answers each leg reads, a "
                             f"whole number from 1 to {legs - 1} with {legs} models, not "
                             f"{peers!r}; or drop it for the default")
    return rounds, peers


def _aggregate(data: dict[str, Any], who: str) -> str | None:
    """A fanout's ``aggregate``: ``"vote"`` grades the majority of its final answers (the
    chair's synthesis is the other way to one answer: not both)."""
    value = data.get("aggregate")
    if value is None:
        return None
    if value not in AGGREGATES:
        raise PreflightError(f"{who}: `aggregate` is {' or '.join(map(repr, AGGREGATES))} "
                             f"(the majority of the final answers is graded), not {value!r}")
    if data.get("chair"):
        raise PreflightError(f"{who}: `aggregate = \"vote\"` and `chair` each make the one "
                             "answer a trial grades; keep one (two contestants can compare "
                             "them)")
    return value


def graded(c: Contestant | dict[str, Any]) -> str:
    """What an ensemble's trial grades, as its label says it."""
    get = c.get if isinstance(c, dict) else lambda k: getattr(c, k, None)
    if get("chair"):
        return "+chair"
    if get("aggregate") == "vote":
        return "+vote"
    return " (any member: no chair)" if (get("rounds") or 1) == 1 else \
        " (the deliberation's winner)"


def label(c: Contestant) -> str:
    """How the report names an ensemble: ``fanout(a,b,c)+chair``, ``+vote``, ``… ×3
    rounds``."""
    if c.kind not in ("fanout", "council"):
        return c.name
    return f"{c.kind}({','.join(c.models)})" + ("+chair" if c.chair else "+vote" if
                                                c.aggregate else "") + (
        f" ×{c.rounds} rounds" if c.deliberates else "")


def _int(value: Any, key: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"`{key}` is a whole number from {low} to {high}")
    return value


def _strings(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"`{key}` is a list of strings")
    return list(value)


def check_unique(contestants: list[Contestant]) -> None:
    seen: set[str] = set()
    for c in contestants:
        if c.name in seen:
            raise OrchError(f"contestant name {c.name!r} is used twice; names are unique")
        seen.add(c.name)


# --- command contestants -------------------------------------------------------------------

def command_line(c: Contestant, prompt: str, cwd: Path | str, check: str) -> list[str]:
    """The exact argv: each placeholder replaced in each argument (no shell)."""
    values = {"{task}": prompt, "{cwd}": str(cwd), "{model}": c.model, "{verify}": check}
    out = []
    for arg in [c.command, *c.args]:
        for key, value in values.items():
            arg = arg.replace(key, value)
        out.append(arg)
    return out


def found(c: Contestant) -> bool:
    return shutil.which(c.command) is not None


def run_command(c: Contestant, prompt: str, cwd: Path, check: str, timeout_s: float,
                guard: Guard) -> Finished:
    """Run the contestant in ``cwd``, confined (blocking: call it in a worker thread). On
    timeout, or when ``guard.running`` is stopped, the whole process group is killed."""
    argv = command_line(c, prompt, cwd, check)
    writable = tuple(Path(w).expanduser() for w in c.writable)
    named = tuple(Path(a) for a in (c.command, *c.args) if Path(a).is_absolute() and
                  Path(a).exists())  # files bench.toml names (a script) are shown, read-only
    done = run(guard.command(argv, cwd=cwd, writable=writable, readable=named,
                             network=c.network), cwd=cwd,
               env=guard.env(declared=c.env, passed=tuple(c.pass_env)),
               stdin=prompt.encode() if c.stdin else None, running=guard.running,
               limits=Limits(timeout_s=timeout_s, memory_mb=c.memory_mb,
                             file_mb=guard.file_mb), reap=guard.reaps)
    done.argv = argv  # the contestant's own command line, not the sandbox's
    return done


@dataclass
class Reported:
    answer: str
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    steps: int = 0
    read: bool = False  # the parser found usage in the output


def parse_output(parser: str, stdout: str, guard: Guard) -> Reported | str:
    """What a command said: its answer, tokens and cost; or, as a string, why its output
    could not be read. Parsers other than ``none`` run in a child process (they read
    whatever the command printed). Blocking: call it in a worker thread."""
    if parser == "none":
        return Reported(answer=stdout)
    reply = guard.python({"op": "parse", "parser": parser, "stdout": stdout},
                         PARSE_TIMEOUT_S)
    if "error" in reply:
        return f"its output could not be read as {parser}: {reply['error']}"
    return Reported(**reply["reported"])



def read_output(parser: str, stdout: str) -> Reported:
    """The parser itself (in the child); raises on output it cannot read."""
    if parser == "claude-json":
        return _claude(stdout)
    if parser == "codex-jsonl":
        return _codex(stdout)
    if parser == "orch-json":
        return _orch(stdout)
    return Reported(answer=stdout)


def _n(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and value >= 0 else 0


def _claude(stdout: str) -> Reported:
    lines = stdout.strip().splitlines()
    if not lines:
        raise ValueError("empty output (is the CLI installed and logged in?)")
    doc = json.loads(lines[-1])
    if not isinstance(doc, dict):
        raise ValueError("the last line is JSON but not an object")
    usage = doc.get("usage") or {}
    cost = doc.get("total_cost_usd", doc.get("cost_usd"))
    cached = _n(usage.get("cache_read_input_tokens"))
    return Reported(answer=str(doc.get("result", "")),
                    input_tokens=_n(usage.get("input_tokens")) + cached
                    + _n(usage.get("cache_creation_input_tokens")),
                    output_tokens=_n(usage.get("output_tokens")), cached_tokens=cached,
                    cost_usd=float(cost) if isinstance(cost, int | float) else None,
                    steps=_n(doc.get("num_turns")), read=bool(usage) or cost is not None)


def _codex(stdout: str) -> Reported:
    out, events = Reported(answer=""), 0
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        events += 1
        item = event.get("item") or event.get("msg") or {}
        if not isinstance(item, dict):
            continue
        if item.get("type") == "agent_message":
            out.answer = str(item.get("text", item.get("message", "")))
        usage = event.get("usage") if event.get("type") == "turn.completed" else \
            (item.get("info") or {}).get("total_token_usage") \
            if item.get("type") == "token_count" else None
        if isinstance(usage, dict):
            out.input_tokens = _n(usage.get("input_tokens"))
            out.cached_tokens = _n(usage.get("cached_input_tokens"))
            out.output_tokens = _n(usage.get("output_tokens"))
            out.read = True
        if event.get("type") == "turn.completed":
            out.steps += 1
    if not events:
        raise ValueError("no JSON events in the output" if stdout.strip() else "empty output")
    return out


def _orch(stdout: str) -> Reported:
    if not stdout.strip():
        raise ValueError("empty output")
    doc = json.loads(stdout)
    if not isinstance(doc, dict):
        raise ValueError("the output is JSON but not an object")
    legs = [doc["chair"]] if doc.get("chair") else doc.get("legs") or []
    answer = next((leg.get("answer") or "" for leg in legs if leg.get("status") == "complete"),
                  "")
    usage = doc.get("usage") or {}
    cost = doc.get("cost_usd")
    return Reported(answer=answer, input_tokens=_n(usage.get("input_tokens")),
                    output_tokens=_n(usage.get("output_tokens")),
                    cached_tokens=_n(usage.get("cached_tokens")),
                    cost_usd=float(cost) if isinstance(cost, int | float) else None,
                    steps=sum(_n(leg.get("steps")) for leg in legs), read=bool(usage))
