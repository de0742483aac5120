"""Contestants: orch models, and agent CLIs run as subprocesses in the trial folder.

A command contestant's usage and cost come from its own output through a ``parse``r; what
it reports is recorded as reported (cost source ``reported``), never priced by orch.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.errors import OrchError

KINDS = ("model", "command")
PARSERS = ("none", "claude-json", "codex-jsonl", "orch-json")
TOOLS = ("read", "none")
PLACEHOLDERS = ("{task}", "{cwd}", "{model}", "{verify}")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@/:+-]{0,79}$")
_MODEL_KEYS = {"name", "kind", "model", "tier", "tools", "max_steps", "disable_plugins", "note"}
_COMMAND_KEYS = {"name", "kind", "command", "args", "stdin", "env", "timeout_s", "parse",
                 "note", "model", "jobs"}


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

    def to_dict(self) -> dict[str, Any]:
        keys = _MODEL_KEYS if self.kind == "model" else _COMMAND_KEYS
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
        raise OrchError(f"{where} ({name}): `kind` is `model` or `command`")
    allowed = _MODEL_KEYS if kind == "model" else _COMMAND_KEYS
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
        c.note = str(data.get("note", ""))
    except (TypeError, ValueError) as exc:
        raise OrchError(f"{where} ({name}): {exc}") from None
    return c


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


@dataclass
class CommandResult:
    argv: list[str]
    exit_code: int | None
    stdout: str
    stderr: str
    secs: float
    timed_out: bool = False
    error: str | None = None


class Running:
    """The command trials' processes, so an interrupt can kill them: each runs in its own
    session (a terminal's Ctrl-C never reaches it) and blocks a worker thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen] = set()
        self.stopped = False

    def add(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.add(proc)
            if not self.stopped:
                return
        _kill_group(proc)  # started as the interrupt arrived

    def discard(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.discard(proc)

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            procs = list(self._procs)
        for proc in procs:
            _kill_group(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_command(c: Contestant, prompt: str, cwd: Path, check: str,
                timeout_s: float, running: Running | None = None) -> CommandResult:
    """Run the contestant in ``cwd`` (blocking: call it in a worker thread). On timeout, or
    when ``running`` is stopped, the whole process group is killed."""
    argv = command_line(c, prompt, cwd, check)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE if c.stdin else
                                subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env={**os.environ, **c.env},
                                start_new_session=True)
    except OSError as exc:
        return CommandResult(argv, None, "", "", 0.0, error=f"cannot start {c.command}: "
                             f"{exc.strerror or exc}")
    if running is not None:
        running.add(proc)
    try:
        out, err = proc.communicate(prompt.encode() if c.stdin else None, timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        timed_out = True
    finally:
        if running is not None:
            running.discard(proc)
    return CommandResult(argv, proc.returncode, out.decode("utf-8", "replace"),
                         err.decode("utf-8", "replace"), time.monotonic() - start, timed_out)


@dataclass
class Reported:
    answer: str
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    steps: int = 0
    read: bool = False  # the parser found usage in the output


def parse_output(parser: str, stdout: str) -> Reported:
    """What a command said: its answer, tokens and cost. Unreadable output: the raw text."""
    try:
        if parser == "claude-json":
            return _claude(stdout)
        if parser == "codex-jsonl":
            return _codex(stdout)
        if parser == "orch-json":
            return _orch(stdout)
    except (ValueError, TypeError, KeyError, AttributeError):
        pass
    return Reported(answer=stdout)


def _n(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and value >= 0 else 0


def _claude(stdout: str) -> Reported:
    doc = json.loads(stdout.strip().splitlines()[-1])
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
    out = Reported(answer="")
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        item = event.get("item") or event.get("msg") or {}
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
    return out


def _orch(stdout: str) -> Reported:
    doc = json.loads(stdout)
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
