"""No call into plugin code escapes the runner (orchestrator/plugin_host/boundary.py).

The call sites are enumerated from the source (``ast`` over ``orchestrator/`` and
``plugins/``): a pluggy hook called directly (``pm.hook.X(...)``), a hook implementation's
function called (``impl.function(...)``), the implementations or plugin objects fetched
(``get_hookimpls``, ``get_plugin``, ``list_name_plugin``), an entry point imported
(``ep.load()``, ``EntryPoint(...)``), a plugin file run (``loader.exec_module(...)``), a
plugin's declaration read by name
(``getattr(plugin, "FAIL_CLOSED")``, ``getattr(plugin, "register_options")``). Each may
appear only in the runner's own modules, and there only on a line that says why it is
safe (``# runner: ...``: inside a worker call, on the plugin loop, a built-in inline).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The runner: where plugin code is reached, each raw site marked.
RUNNER = {
    "orchestrator/plugin_host/boundary.py",
    "orchestrator/plugin_host/hooks.py",
    "orchestrator/plugin_host/handover.py",
    "orchestrator/plugin_host/plugins.py",
    "orchestrator/plugin_host/snapshot.py",
    "orchestrator/plugin_host/plugin_loop.py",
    "orchestrator/plugin_host/declared.py",
    "orchestrator/plugin_host/directory.py",  # a plugin file's import, inside import_plugin
    "orchestrator/tools.py",  # a built-in's tool, inline; a third party's through the runner
}
MARK = "# runner:"

FETCHERS = {"get_hookimpls", "get_plugin", "get_plugins", "list_name_plugin",
            "list_plugin_distinfo"}
ENTRY_POINTS = {"ep", "entry", "entry_point", "found"}
DECLARATIONS = {"FAIL_CLOSED", "HOOK_DEADLINE_S", "CONFIG_SCHEMA", "NAME", "AFTER", "BEFORE"}


def hook_names() -> set[str]:
    from orchestrator.plugin_host.plugins import HOOK_NAMES

    return set(HOOK_NAMES)


def raw_sites(source: str, hooks: set[str]) -> list[tuple[int, str]]:
    """(line, what) for each place ``source`` reaches plugin code without the runner."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            if node.attr in FETCHERS:
                found.append((node.lineno, f".{node.attr}"))
            elif isinstance(node.value, ast.Attribute) and node.value.attr == "hook" and \
                    node.attr in hooks:
                found.append((node.lineno, f".hook.{node.attr}"))
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr == "function":
                found.append((node.lineno, ".function(...)"))
            elif func.attr == "load" and not node.args and isinstance(func.value, ast.Name) \
                    and func.value.id in ENTRY_POINTS:
                found.append((node.lineno, f"{func.value.id}.load()"))
            elif func.attr == "EntryPoint":
                found.append((node.lineno, "EntryPoint(...)"))
            elif func.attr == "exec_module":  # a plugin file run (directory.py)
                found.append((node.lineno, ".exec_module(...)"))
            elif func.attr == "hook" or (isinstance(func.value, ast.Attribute)
                                          and func.value.attr == "hook"):
                found.append((node.lineno, "pm.hook call"))
            elif func.attr == "import_file":
                found.append((node.lineno, ".import_file(...)"))
        if isinstance(func, ast.Name) and func.id == "import_file":  # directory.py's import
            found.append((node.lineno, "import_file(...)"))
        elif isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and (name.value in DECLARATIONS
                                                   or name.value in hooks):
                found.append((node.lineno, f"getattr(..., {name.value!r})"))
            if isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "hook":
                found.append((node.lineno, "getattr(pm.hook, ...)"))
    once = {}
    for line, what in found:  # one site per line (``pm.hook.x(...)`` is two shapes)
        once.setdefault(line, what)
    return sorted(once.items())


def escapes(root: Path) -> list[str]:
    hooks = hook_names()
    out = []
    for top in ("orchestrator", "plugins"):
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            source = path.read_text(encoding="utf-8")
            lines = source.splitlines()
            for line, what in raw_sites(source, hooks):
                if rel in RUNNER and MARK in lines[line - 1]:
                    continue
                where = "outside the runner" if rel not in RUNNER else f"without {MARK!r}"
                out.append(f"{rel}:{line}: {what} {where}")
    return out


def test_no_call_into_plugin_code_escapes_the_runner():
    assert escapes(ROOT) == []


@pytest.mark.parametrize("snippet", [
    "pm.hook.before_request(leg=leg, request=request)",
    "getattr(pm.hook, name)(leg=leg)",
    "for impl in caller.get_hookimpls(): pass",
    "impl.function(leg)",
    "ep.load()",
    "metadata.EntryPoint(name, value, 'orch').load()",
    "getattr(plugin, 'FAIL_CLOSED', False)",
    "declare = getattr(plugin, 'register_options', None)",
    "pm.get_plugin('tiers').decide(model)",
    "pm.list_name_plugin()",
    "spec.loader.exec_module(module)",
    "directory.import_file(name, path)",
    "getattr(plugin, 'AFTER', ())",
])
def test_each_way_around_the_runner_is_found(snippet):
    """The enumeration itself: every shape of a direct call is seen (so the test above
    fails when one lands outside the runner)."""
    assert raw_sites(snippet, hook_names()), snippet


def test_a_bypass_in_a_core_module_fails_the_enumeration(tmp_path):
    """A copy of the tree with one module calling a hook directly fails it, naming the
    line."""
    import shutil

    for top in ("orchestrator", "plugins"):
        shutil.copytree(ROOT / top, tmp_path / top,
                        ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "orchestrator" / "app" / "model_choice.py"
    target.write_text(target.read_text() + "\n\ndef sneaky(pm, cfg):\n"
                      "    return pm.hook.default_models(config=cfg)\n")
    found = escapes(tmp_path)
    assert len(found) == 1 and found[0].startswith("orchestrator/app/model_choice.py:")
    assert "outside the runner" in found[0]
