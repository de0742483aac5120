"""The account is the one choke point for money: these tests read the source (stdlib ``ast``)
of ``orchestrator/`` and ``plugins/`` and enumerate the call sites, so the next path cannot
skip it. Each rule is also run over a small source that bypasses it, to show it can fail.

- every request goes on the wire through ``Leg._send``: claimed on the run's account and
  journaled (fsync'd) before the server is called;
- every run built in the core (a council, a deliberation, a bench, their waves) is handed
  its run's account; a fresh account is made only where a new run id is minted (nothing can
  be held for it yet) — a resume, a retry or any other path opens it from the record.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FACES = ("cli", "mcp_server", "daemon", "testing", "ui")
RUNS = ("Wave", "BenchWave", "CouncilRun", "Deliberation")
# where a fresh Account is made: each mints the run id it is for
FRESH = {
    "orchestrator/engine/wave.py",  # a wave of its own: a new wave id
    "orchestrator/council/run.py",  # a new council run id
    "orchestrator/deliberation/run.py",  # a new deliberation run id
    "orchestrator/bakeoff/run.py",  # a new bench id (a resume's is opened: bakeoff/resume.py)
    "orchestrator/engine/retry.py",  # a family without a ceiling: nothing is checked
}


def sources() -> dict[str, ast.Module]:
    out = {}
    for folder in ("orchestrator", "plugins"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            out[rel] = ast.parse(path.read_text(encoding="utf-8"), rel)
    return out


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _receiver(func: ast.expr) -> str:
    return ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""


def _functions(tree: ast.Module):
    """(function name, its calls) for every function, innermost wins."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, [n for n in ast.walk(node) if isinstance(n, ast.Call)]


def wire_bypasses(trees: dict[str, ast.Module]) -> list[str]:
    """Calls that put a request on the wire anywhere but the journaled ``Leg._send``."""
    bad = []
    for rel, tree in trees.items():
        for fn, calls in _functions(tree):
            if rel.startswith("orchestrator/testing/"):  # the scripted provider itself
                continue
            for call in calls:
                name = _name(call.func)
                if name == "complete" and "server" in _receiver(call.func):
                    if (rel, fn) != ("orchestrator/engine/leg.py", "_send"):
                        bad.append(f"{rel}:{call.lineno} {fn}: server.complete")
                elif name in ("acompletion", "completion") and rel.startswith("orchestrator"):
                    mocked = any(k.arg == "mock_response" for k in call.keywords)
                    if rel != "orchestrator/models/server.py" and not mocked:
                        bad.append(f"{rel}:{call.lineno} {fn}: {name}")
    return sorted(set(bad))


def unjournaled(tree: ast.Module) -> list[str]:
    """In ``_send``: the claim and the journal come before the server is called."""
    for fn, calls in _functions(tree):
        if fn != "_send":
            continue
        at = {_name(c.func): c.lineno for c in calls}
        wire = at.get("complete")
        if wire is None:
            return ["_send sends nothing"]
        return [f"{step} is not before the wire" for step in ("claim_request", "run_sync")
                if at.get(step, wire + 1) > wire]
    return ["no _send"]


def account_bypasses(trees: dict[str, ast.Module]) -> list[str]:
    """Runs a run builds in the core (inside a run's method, or a bench's trial given its
    ``runner``) without the run's account; fresh accounts where no new run id is minted.
    (A function that starts a new run — ``run_deliberation``, the faces — builds it
    without one: the run makes its own for the id it mints.)"""
    bad = []
    for rel, tree in trees.items():
        core = rel.startswith("orchestrator/") and rel.split("/")[1] not in FACES
        for node in ast.walk(tree):
            if core and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and \
                    {a.arg for a in node.args.args} & {"self", "runner"}:
                for call in ast.walk(node):
                    if isinstance(call, ast.Call) and _name(call.func) in RUNS and \
                            not isinstance(call.func, ast.Attribute) and \
                            not any(k.arg == "account" for k in call.keywords):
                        bad.append(f"{rel}:{call.lineno} {_name(call.func)}(...) without "
                                   "account=")
            if isinstance(node, ast.Call) and _name(node.func) == "Account" and \
                    rel not in FRESH and not rel.startswith("orchestrator/account/"):
                bad.append(f"{rel}:{node.lineno} a fresh Account (open it from the record)")
    return sorted(set(bad))


def test_every_request_goes_through_the_journaled_send():
    trees = sources()
    assert wire_bypasses(trees) == []
    assert unjournaled(trees["orchestrator/engine/leg.py"]) == []


def test_every_core_run_spends_through_its_account():
    assert account_bypasses(sources()) == []


def test_the_rules_catch_a_bypass():
    bypass = ast.parse(
        "async def shortcut(self, request):\n"
        "    return await self.server.complete(self.model, request)\n"
        "def resume(self, plan):\n"
        "    return Wave(spec, pm=pm, config=cfg), Account(run_id=plan.id)\n")
    trees = {"orchestrator/bakeoff/shortcut.py": bypass}
    assert wire_bypasses(trees) == ["orchestrator/bakeoff/shortcut.py:2 shortcut: "
                                    "server.complete"]
    assert account_bypasses(trees) == [
        "orchestrator/bakeoff/shortcut.py:4 Wave(...) without account=",
        "orchestrator/bakeoff/shortcut.py:4 a fresh Account (open it from the record)"]
    late = ast.parse("async def _send(self, request):\n"
                     "    response = await self.server.complete(self.model, request)\n"
                     "    self.account.claim_request(self.ctx, request)\n"
                     "    await anyio.to_thread.run_sync(self.journal.sent)\n")
    assert unjournaled(late) == ["claim_request is not before the wire",
                                 "run_sync is not before the wire"]
