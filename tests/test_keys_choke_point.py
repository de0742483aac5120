"""Every read of a key variable goes through ``orchestrator.keys``: the one place that knows a
run's declared variables (in-process and in the daemon alike). A read of the process's
environment elsewhere in the core, the built-in plugins or the CLI must name a fixed,
non-secret variable (``ORCH_HOME``, ``XDG_RUNTIME_DIR``): a literal, a module constant, or a
loop over one. A name taken from config (a provider's ``api_key_env``) or a key's name is a
read that would see no key under ``orch serve``, and is caught here. The daemon's own module
(its compatibility digest of process settings) and the test kit are faces outside a run."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READERS = ("os.environ.get", "os.getenv", "os.environ.__getitem__")
EXEMPT = ("orchestrator/keys.py", "orchestrator/daemon/", "orchestrator/testing/")
SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.I)


def _constants(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level UPPERCASE names bound to strings, or tuples/lists/dicts of them."""
    out: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            for target in targets:
                if isinstance(target, ast.Name) and target.id.isupper() and value is not None:
                    strings = _strings(value)
                    if strings is not None:
                        out[target.id] = strings
    return out


def _strings(node: ast.AST) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        items = [_strings(e) for e in node.elts]
        return None if any(i is None for i in items) else [s for i in items for s in i]
    if isinstance(node, ast.Dict):
        keys = [_strings(k) for k in node.keys if k is not None]
        return None if any(k is None for k in keys) else [s for k in keys for s in k]
    return None


def _iterated(node: ast.AST, constants: dict[str, list[str]]) -> list[str] | None:
    """The names an iterable yields when it is fixed: a literal, a constant, a constant's
    ``.items()``/``.keys()``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("items", "keys"):
        node = node.func.value
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    return _strings(node)


def _bound_by_loop(name: str, node: ast.AST, parents: dict, constants) -> list[str] | None:
    """The fixed names ``name`` takes when a loop around ``node`` (a ``for`` or a
    comprehension) binds it by iterating over something fixed; else None."""
    while node in parents:
        node = parents[node]
        gens = [node] if isinstance(node, ast.For) else getattr(node, "generators", [])
        for gen in gens:
            target = gen.target.elts[0] if isinstance(gen.target, ast.Tuple) else gen.target
            if isinstance(target, ast.Name) and target.id == name:
                return _iterated(gen.iter, constants)
    return None


def violations(root: Path) -> list[str]:
    found = []
    for top in ("orchestrator", "plugins"):
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel.startswith(EXEMPT) or "migrations" in rel:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            constants = _constants(tree)
            parents = {child: parent for parent in ast.walk(tree)
                       for child in ast.iter_child_nodes(parent)}
            for node in ast.walk(tree):
                arg = None
                if isinstance(node, ast.Call) and ast.unparse(node.func) in READERS and \
                        node.args:
                    arg = node.args[0]
                elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == \
                        "os.environ" and not isinstance(node.ctx, ast.Store | ast.Del):
                    arg = node.slice
                if arg is None:
                    continue
                names = _strings(arg)
                if names is None and isinstance(arg, ast.Name):
                    names = constants.get(arg.id)
                    if names is None:
                        names = _bound_by_loop(arg.id, node, parents, constants)
                if names is None:
                    found.append(f"{rel}:{node.lineno}: {ast.unparse(node)} (a name not fixed "
                                 "in the code: read it with orchestrator.keys)")
                    continue
                for name in names:
                    if SECRET.search(name) and not name.endswith(("_FILE", "_PATH", "_DIR")):
                        found.append(f"{rel}:{node.lineno}: {ast.unparse(node)} reads ${name}, "
                                     "a key: read it with orchestrator.keys")
    return found


def test_every_key_read_goes_through_orchestrator_keys():
    found = violations(ROOT)
    assert not found, "\n".join(found)


def test_the_check_catches_a_read_that_skips_the_choke_point(tmp_path):
    import shutil

    for top in ("orchestrator", "plugins"):
        shutil.copytree(ROOT / top, tmp_path / top,
                        ignore=shutil.ignore_patterns("__pycache__"))
    assert violations(tmp_path) == []
    planted = {
        "orchestrator/models/server.py": "def _late(model):\n    import os\n    return "
                                         "os.environ.get(model.api_key_env)\n",
        "plugins/wire_tags.py": "def _late():\n    import os\n    return "
                                "os.environ['OPENAI_API_KEY']\n",
        "orchestrator/engine/leg.py": "def _late(name):\n    import os\n    return "
                                      "os.getenv(name)\n",
    }
    for rel, code in planted.items():
        path = tmp_path / rel
        path.write_text(path.read_text() + "\n\n" + code)
    caught = {v.split(":")[0] for v in violations(tmp_path)}
    assert caught == set(planted)
