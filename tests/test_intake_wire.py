"""The intake is a choke point by construction: no text reaches a provider another way.

Walks every module of ``orchestrator/`` and ``plugins/`` (stdlib ``ast``) for the places a
request is built or sent, and fails on any that could carry text that did not pass
``orchestrator.intake.admit``:

- a litellm call (``acompletion``, ``completion``, ``responses``, ...) anywhere but the one
  in ``Server.complete``, unless every message it sends is a literal (the daemon's warm-up);
- a ``"messages"`` entry built from anything but literals outside ``models/server.py`` (which
  builds it from the admitted request) and ``request.py`` (its record);
- a ``.complete(...)`` on a server whose request argument is not what ``admit`` returned;
- an ``Admitted`` made anywhere but ``intake/admit.py``.

Each rule is also shown to catch a bypass: the same walk over a copy of the code with the
intake taken out reports it.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WIRE_CALLS = frozenset({"acompletion", "completion", "atext_completion", "text_completion",
                        "aresponses", "responses", "aembedding", "embedding",
                        "amoderation", "moderation", "agenerate_content", "batch_completion"})
SERVER = "orchestrator/models/server.py"
MESSAGE_BUILDERS = {SERVER, "orchestrator/request.py"}
LEG = "orchestrator/engine/leg.py"  # its _send is the one way to the wire
ADMITTED_HOME = "orchestrator/intake/admit.py"
ADMITTERS = frozenset({"admit", "_admit"})


def sources() -> dict[str, str]:
    out = {}
    for top in ("orchestrator", "plugins"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("orchestrator/testing/"):
                continue  # the scripted server and the kit: they receive, never send
            out[rel] = path.read_text(encoding="utf-8")
    return out


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return False


def _name(func: ast.AST) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _enclosing(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    """Each node -> the innermost function holding it."""
    owner: dict[ast.AST, ast.AST] = {}

    def visit(node: ast.AST, fn: ast.AST | None) -> None:
        for child in ast.iter_child_nodes(node):
            if fn is not None:
                owner[child] = fn
            inner = child if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else fn
            visit(child, inner)

    visit(tree, None)
    return owner


def _bound_by_admit(fn: ast.AST, name: str) -> bool:
    """Every assignment of ``name`` in ``fn`` is ``admit(...)``/``self._admit(...)``."""
    values = [node.value for node in ast.walk(fn) if isinstance(node, ast.Assign)
              for target in node.targets
              if isinstance(target, ast.Name) and target.id == name]
    values += [node.value for node in ast.walk(fn) if isinstance(node, ast.AnnAssign)
               and isinstance(node.target, ast.Name) and node.target.id == name and node.value]
    if not values and isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
        # a parameter typed Admitted (the leg's one _send): only the intake makes one (an
        # Admitted made anywhere else is a violation below), and each call site is checked
        params = [a for a in fn.args.args + fn.args.kwonlyargs if a.arg == name]
        return bool(params) and all(a.annotation is not None
                                    and ast.unparse(a.annotation) == "Admitted"
                                    and not _reassigned(fn, name) for a in params)
    return bool(values) and all(isinstance(v, ast.Call) and _name(v.func) in ADMITTERS
                                for v in values)


def _reassigned(fn: ast.AST, name: str) -> bool:
    return any(isinstance(t, ast.Name) and t.id == name for node in ast.walk(fn)
               if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign)
               for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))


def violations(code: dict[str, str]) -> list[str]:
    return [v for rel, text in code.items() for v in _file_violations(rel, text)]


@functools.cache
def _file_violations(rel: str, text: str) -> tuple[str, ...]:
    """One module's violations (remembered: the bypass cases change one file each)."""
    found = []
    tree = ast.parse(text, rel)
    owner = _enclosing(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _name(node.func)
            if name in WIRE_CALLS and isinstance(node.func, ast.Attribute):
                fn = owner.get(node)
                in_server = rel == SERVER and fn is not None and fn.name == "send"
                messages = [k.value for k in node.keywords if k.arg == "messages"]
                spread = any(k.arg is None for k in node.keywords)
                if not in_server and (spread or not messages
                                      or not all(_literal(m) for m in messages)):
                    found.append(f"{rel}:{node.lineno}: {name}() sends text that did not "
                                 "pass the intake")
            if name == "_send" and rel == LEG and isinstance(node.func, ast.Attribute):
                arg = node.args[0] if node.args else None
                fn = owner.get(node)
                if not (isinstance(arg, ast.Name) and fn is not None
                        and _bound_by_admit(fn, arg.id)):
                    found.append(f"{rel}:{node.lineno}: _send() is given a request admit() "
                                 "did not return")
            if name == "complete" and isinstance(node.func, ast.Attribute) \
                    and "server" in ast.unparse(node.func.value).lower():
                arg = node.args[1] if len(node.args) > 1 else next(
                    (k.value for k in node.keywords if k.arg == "admitted"), None)
                fn = owner.get(node)
                if not (isinstance(arg, ast.Name) and fn is not None
                        and _bound_by_admit(fn, arg.id)):
                    found.append(f"{rel}:{node.lineno}: server.complete() is given a "
                                 "request admit() did not return")
            if name == "Admitted" and rel != ADMITTED_HOME:
                found.append(f"{rel}:{node.lineno}: an Admitted made outside the intake")
        if isinstance(node, ast.Dict) and rel not in MESSAGE_BUILDERS:
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "messages" \
                        and not _literal(value):
                    found.append(f"{rel}:{node.lineno}: a request's messages built "
                                 "outside the intake's path")
    return tuple(found)




def test_no_text_reaches_the_wire_but_through_the_intake():
    assert violations(sources()) == []


def test_the_walk_sees_the_wire_it_guards():
    """Not vacuous: the one wire call and the leg's sends are where the rules look."""
    code = sources()
    tree = ast.parse(code[SERVER])
    assert any(isinstance(n, ast.Call) and _name(n.func) == "acompletion"
               for n in ast.walk(tree))
    leg = ast.parse(code["orchestrator/engine/leg.py"])
    wire = [n for n in ast.walk(leg) if isinstance(n, ast.Call) and _name(n.func) == "complete"]
    sends = [n for n in ast.walk(leg) if isinstance(n, ast.Call) and _name(n.func) == "_send"]
    assert len(wire) == 1 and len(sends) >= 2  # one wire call, behind the leg's one _send


BYPASSES = [
    # the leg hands the server its request as the plugins left it
    ("orchestrator/engine/leg.py", "admitted = self._admit(request)",
     "admitted = request", "_send() is given a request"),
    # the leg's one send handed something else than what it was given
    ("orchestrator/engine/leg.py", "        response = await self.server.complete(self.ctx.model, admitted,",
     "        admitted = admitted.request\n"
     "        response = await self.server.complete(self.ctx.model, admitted,",
     "server.complete() is given a request"),
    # a plugin calls litellm itself with the conversation
    ("plugins/doom_loop.py", "from __future__ import annotations",
     "from __future__ import annotations\nasync def _ask(lm, leg):\n"
     "    return await lm.acompletion(model='x', messages=leg.messages)\n",
     "acompletion() sends text"),
    # a module builds a provider body of its own
    ("orchestrator/chair/synthesis.py", "from __future__ import annotations",
     "from __future__ import annotations\ndef _body(text):\n"
     "    return {'model': 'x', 'messages': [{'role': 'user', 'content': text}]}\n",
     "messages built outside"),
    # an Admitted forged outside the intake
    ("orchestrator/engine/leg.py", "admitted = self._admit(request)",
     "admitted = Admitted(request, {}, 0)", "an Admitted made outside"),
]


@pytest.mark.parametrize("path,old,new,said", BYPASSES)
def test_a_bypass_is_caught(path, old, new, said):
    code = sources()
    assert old in code[path]
    code[path] = code[path].replace(old, new, 1)
    assert any(said in v for v in violations(code)), violations(code)


def test_the_server_refuses_a_request_the_intake_never_saw():
    import anyio

    from orchestrator.models.addressing import ResolvedModel
    from orchestrator.models.server import Server
    from orchestrator.request import Request

    model = ResolvedModel(name="p/m", provider="p", litellm_model="openai/m",
                          api_base="http://127.0.0.1:9/v1", declared=True)
    raw = Request(model="p/m", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(TypeError, match="admitted requests only"):
        anyio.run(Server(timeout_s=1).complete, model, raw)
    from orchestrator.intake import Admitted

    with pytest.raises(TypeError, match="orchestrator.intake.admit only"):
        Admitted(raw, {}, 0)
