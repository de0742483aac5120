"""The layers, read from the import graph (``ast``, imports inside functions included):

- the core never imports a plugin: nothing under ``orchestrator/`` imports ``orch_plugins``
  (plugins reach the core through hookspecs and public modules, never the reverse);
- only a face imports a face: no module outside ``orchestrator.cli``, ``orchestrator.mcp_server``,
  ``orchestrator.daemon``, ``orchestrator.testing`` and ``orchestrator.ui`` (core or plugin)
  imports one of them;
- the web view reads the core only: ``orchestrator.ui`` imports no other face (``orch ui`` is
  a thin command in cli/ that imports it, never the reverse);
- the faces share the application layer (``orchestrator.app``), not each other: only cli/
  imports a module of ``orchestrator.cli``; the test kit and ``python -m orchestrator`` may
  import the group's entry, ``orchestrator.cli`` itself, and nothing else does: the daemon
  runs prepared requests and imports nothing of cli/; the CLI reaches the daemon through its
  client and protocol modules only (``orchestrator.daemon.client``,
  ``orchestrator.daemon.protocol``); ``orchestrator.mcp_server`` and ``orchestrator.daemon``
  do not import each other; the application layer imports no face and names no face's
  library either (no ``click``, no ``mcp``): it raises ``OrchError`` and each face says it;
- no circle: no module of ``orchestrator/`` or ``plugins/`` reaches itself through its imports
  (``graphlib`` finds the cycle). An import inside a function or under ``TYPE_CHECKING`` counts
  like one at the top: it is the same dependency, paid later, and a circle made of late imports
  is still two concepts that cannot be read apart. A package importing its own submodules is
  not an edge (that is what a package is).

The same rules as the project's ``import-cycles`` tool, kept in the suite so no new violation
can land.
"""

from __future__ import annotations

import ast
import functools
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (("orchestrator", "orchestrator"), ("plugins", "orch_plugins"))
FACES = ("orchestrator.cli", "orchestrator.mcp_server", "orchestrator.daemon",
         "orchestrator.testing", "orchestrator.ui")


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for the core and the built-in plugins."""
    found = {}
    for top, package in PACKAGES:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root / top)
            if "migrations" in rel.parts:
                continue
            name = ".".join((package, *rel.with_suffix("").parts)).removesuffix(".__init__")
            found[name] = path
    return found


def imports(name: str, path: Path) -> set[str]:
    """Every module ``name`` imports: ``import``, ``from ... import`` (relative ones made
    absolute) and ``importlib.import_module``/``__import__`` of a literal name."""
    return set(_imports(name, path.name == "__init__.py", path.read_text(encoding="utf-8")))


@functools.cache
def _imports(name: str, is_package: bool, text: str) -> frozenset[str]:
    """:func:`imports` of one module's text, parsed once: the planted-violation tests read
    copies of the whole tree, every file but one the same text."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(text, name)):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".") if is_package else name.split(".")[:-1]
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__"):
                out.add(node.args[0].value)
    return frozenset(out)


def face(module: str) -> str | None:
    return next((f for f in FACES if module == f or module.startswith(f + ".")), None)


def violations(root: Path) -> tuple[list[str], set[tuple[str, str]]]:
    """(core modules importing a plugin, (importer, face module) pairs from outside the
    faces)."""
    mods = modules(root)

    def resolved(target: str) -> str:  # the module a dotted name lands in (not a class in it)
        while target and target not in mods:
            target = target.rpartition(".")[0]
        return target

    core_to_plugin, to_face = set(), set()
    for name, path in mods.items():
        for target in imports(name, path):
            if name.startswith("orchestrator") and (
                    target == "orch_plugins" or target.startswith("orch_plugins.")):
                core_to_plugin.add(f"{name} -> {resolved(target) or target}")
            if face(target) and face(name) is None and name != "orchestrator.__main__":
                to_face.add((name, resolved(target) or target))
    return sorted(core_to_plugin), to_face


def test_the_core_never_imports_a_plugin():
    core_to_plugin, _ = violations(ROOT)
    assert not core_to_plugin, (
        "the core imports a plugin (move what it needs into the core and let the plugin "
        "import it): " + "; ".join(core_to_plugin))


def graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the tree it imports (a name inside a module is that module)."""
    mods = modules(root)

    def resolved(target: str) -> str:
        while target and target not in mods:
            target = target.rpartition(".")[0]
        return target

    out: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = path.name == "__init__.py"
        out[name] = {t for t in map(resolved, imports(name, path))
                     if t and t != name and not (package and t.startswith(name + "."))}
    return out


def cycle(root: Path) -> list[str] | None:
    """One import cycle of the tree (its modules in order, the first repeated), or None."""
    try:
        graphlib.TopologicalSorter(graph(root)).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return None


def test_no_import_cycle():
    found = cycle(ROOT)
    assert found is None, ("an import cycle (move the shared piece into a module both import, "
                           "or pass it in): " + " -> ".join(found or ()))


def test_only_a_face_imports_a_face():
    new = sorted(violations(ROOT)[1])
    assert not new, ("a module outside cli/, mcp_server/, daemon/ and testing/ imports one of "
                     "them: " + "; ".join(f"{m} -> {t}" for m, t in new))


def test_the_web_view_imports_no_other_face():
    mods = modules(ROOT)
    bad = sorted(f"{name} -> {target}" for name, path in mods.items()
                 if face(name) == "orchestrator.ui"
                 for target in imports(name, path) if face(target) not in (None, "orchestrator.ui"))
    assert not bad, "orchestrator.ui imports another face: " + "; ".join(bad)


GROUP_ENTRY_USERS = ("orchestrator.testing", "orchestrator.__main__")


def cli_reaches(root: Path) -> list[str]:
    """Imports of ``orchestrator.cli`` from outside cli/ that the layers forbid: any of its
    modules, or the group's entry from anywhere but the daemon, the test kit and __main__."""
    mods = modules(root)

    def resolved(target: str) -> str:
        while target and target not in mods:
            target = target.rpartition(".")[0]
        return target

    bad = set()
    for name, path in mods.items():
        if face(name) == "orchestrator.cli":
            continue
        for target in map(resolved, imports(name, path)):
            if face(target) != "orchestrator.cli":
                continue
            entry_ok = any(name == u or name.startswith(u + ".") for u in GROUP_ENTRY_USERS)
            if target != "orchestrator.cli" or not entry_ok:
                bad.add(f"{name} -> {target}")
    return sorted(bad)


DAEMON_FOR_THE_CLI = ("orchestrator.daemon", "orchestrator.daemon.client",
                      "orchestrator.daemon.protocol")


def cli_into_daemon(root: Path) -> list[str]:
    """Imports of a daemon module other than its client and protocol from cli/."""
    mods = modules(root)

    def resolved(target: str) -> str:
        while target and target not in mods:
            target = target.rpartition(".")[0]
        return target

    return sorted(f"{name} -> {target}" for name, path in mods.items()
                  if face(name) == "orchestrator.cli"
                  for target in map(resolved, imports(name, path))
                  if face(target) == "orchestrator.daemon" and target not in DAEMON_FOR_THE_CLI)


def app_imports_a_face(root: Path) -> list[str]:
    """Imports of any face (cli/, mcp_server/, daemon/, testing/, ui/) from orchestrator/app/."""
    return sorted(f"{name} -> {target}" for name, path in modules(root).items()
                  if name == "orchestrator.app" or name.startswith("orchestrator.app.")
                  for target in imports(name, path) if face(target))


def faces_crossing(root: Path) -> list[str]:
    """Imports between the MCP server and the daemon, either way."""
    mods = modules(root)
    pair = {"orchestrator.mcp_server": "orchestrator.daemon",
            "orchestrator.daemon": "orchestrator.mcp_server"}
    return sorted(f"{name} -> {target}" for name, path in mods.items()
                  if face(name) in pair
                  for target in imports(name, path) if face(target) == pair[face(name)])


FACE_LIBRARIES = ("click", "mcp")


def app_face_libraries(root: Path) -> list[str]:
    """Imports of a face's library (click, the MCP SDK) from the application layer."""
    return sorted(f"{name} -> {target}" for name, path in modules(root).items()
                  if name == "orchestrator.app" or name.startswith("orchestrator.app.")
                  for target in imports(name, path)
                  if target.split(".")[0] in FACE_LIBRARIES)


def test_the_application_layer_imports_no_face_library():
    bad = app_face_libraries(ROOT)
    assert not bad, ("orchestrator/app/ imports a face's library (raise OrchError or "
                     "UsageProblem and let each face say it): " + "; ".join(bad))


def test_the_face_library_check_catches_click_in_the_app(tmp_path):
    copy_tree(tmp_path)
    assert app_face_libraries(tmp_path) == []
    path = tmp_path / "orchestrator/app/runs.py"
    path.write_text(path.read_text() + "\n\ndef _late():\n    import click.exceptions\n")
    assert app_face_libraries(tmp_path) == ["orchestrator.app.runs -> click.exceptions"]


def test_only_the_cli_imports_the_cli():
    bad = cli_reaches(ROOT)
    assert not bad, ("a module outside cli/ imports the CLI (move what it needs into "
                     "orchestrator/app/; the daemon runs prepared requests, never the click "
                     "group): " + "; ".join(bad))


def test_the_cli_reaches_the_daemon_through_its_client_and_protocol_only():
    bad = cli_into_daemon(ROOT)
    assert not bad, ("cli/ imports a daemon module other than its client and protocol (put "
                     "what it needs in orchestrator/daemon/client.py): " + "; ".join(bad))


def test_the_application_layer_imports_no_face():
    bad = app_imports_a_face(ROOT)
    assert not bad, ("orchestrator/app/ imports a face (faces call the application, never "
                     "the reverse): " + "; ".join(bad))


@pytest.mark.parametrize("victim, line, check", [
    ("orchestrator/cli/serve.py", "from orchestrator.daemon import server", "cli_daemon"),
    ("orchestrator/cli/running.py", "from orchestrator.daemon.job import Job", "cli_daemon"),
    ("orchestrator/cli/fanout.py", "import orchestrator.daemon.paths", "cli_daemon"),
    ("orchestrator/app/start.py", "from orchestrator.daemon import client", "app_face"),
    ("orchestrator/app/prepare.py", "from orchestrator.mcp_server import tools", "app_face"),
    ("orchestrator/app/wave.py", "import orchestrator.ui.views", "app_face"),
    ("orchestrator/daemon/job.py", "from orchestrator.cli import cli", "daemon_cli"),
    ("orchestrator/daemon/server.py", "from orchestrator.cli.running import run",
     "daemon_cli"),
])
def test_the_new_rules_catch_a_planted_violation(tmp_path, victim, line, check):
    """The CLI through the daemon's client only, the application importing no face, the
    daemon importing nothing of cli/: each holds on the tree, and a copy with one bad
    import inside a function is caught."""
    copy_tree(tmp_path)
    find = {"cli_daemon": cli_into_daemon, "app_face": app_imports_a_face,
            "daemon_cli": cli_reaches}[check]
    assert find(tmp_path) == []
    path = tmp_path / victim
    path.write_text(path.read_text() + f"\n\ndef _late():\n    {line}\n")
    assert [v for v in find(tmp_path) if v.startswith(module_of(victim) + " -> ")]


def test_the_mcp_server_and_the_daemon_import_each_other_not():
    bad = faces_crossing(ROOT)
    assert not bad, ("the MCP server and the daemon import each other (share it through "
                     "orchestrator/app/): " + "; ".join(bad))


@pytest.mark.parametrize("victim, line", [
    ("orchestrator/mcp_server/tools.py", "from orchestrator.cli.fanout import prepare_wave"),
    ("orchestrator/daemon/server.py", "from orchestrator.cli import fanout"),
    ("orchestrator/mcp_server/server.py", "from orchestrator.cli import cli"),
    ("orchestrator/app/wave.py", "from orchestrator.cli.common import print_json"),
])
def test_the_cli_check_catches_a_face_reaching_into_the_cli(tmp_path, victim, line):
    copy_tree(tmp_path)
    assert cli_reaches(tmp_path) == []
    path = tmp_path / victim
    path.write_text(path.read_text() + f"\n\ndef _late():\n    {line}\n")
    assert [v for v in cli_reaches(tmp_path) if v.startswith(module_of(victim) + " -> ")]


@pytest.mark.parametrize("victim, line", [
    ("orchestrator/mcp_server/tools.py", "from orchestrator.daemon import client"),
    ("orchestrator/daemon/job.py", "import orchestrator.mcp_server.tools"),
])
def test_the_crossing_check_catches_the_mcp_server_and_the_daemon(tmp_path, victim, line):
    copy_tree(tmp_path)
    assert faces_crossing(tmp_path) == []
    path = tmp_path / victim
    path.write_text(path.read_text() + f"\n\ndef _late():\n    {line}\n")
    assert [v for v in faces_crossing(tmp_path) if v.startswith(module_of(victim) + " -> ")]


def module_of(rel: str) -> str:
    return rel.removesuffix(".py").replace("/", ".")


@pytest.mark.parametrize("line, rule", [
    ("from orch_plugins.workspace_paths import Workspace", "plugin"),
    ("import orch_plugins.tiers", "plugin"),
    ("importlib.import_module('orch_plugins.local')", "plugin"),
    ("from orchestrator.cli.common import OrchError", "face"),
    ("from orchestrator.daemon import server", "face"),
    ("from ..mcp_server import schemas", "face"),
])
def test_the_checks_catch_a_new_violation(tmp_path, line, rule):
    """A copy of the tree with one bad import inside a function is caught."""
    copy_tree(tmp_path)
    victim = tmp_path / "orchestrator" / "council" / "chair.py"
    victim.write_text(victim.read_text() + f"\n\ndef _late():\n    {line}\n")
    core_to_plugin, to_face = violations(tmp_path)
    if rule == "plugin":
        assert any(v.startswith("orchestrator.council.chair -> orch_plugins") for v in
                   core_to_plugin)
    else:
        assert any(m == "orchestrator.council.chair" for m, _ in to_face)


def copy_tree(to: Path) -> None:
    for top, _ in PACKAGES:
        for path in (ROOT / top).rglob("*.py"):
            if "migrations" in path.parts or "__pycache__" in path.parts:
                continue
            copy = to / path.relative_to(ROOT)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(path.read_bytes())


@pytest.mark.parametrize("victim, text", [
    # errors <- models <- council.chair: the errors module reaching back up, late
    ("orchestrator/errors.py", "\n\ndef _late():\n    from orchestrator.council import chair\n"),
    # the ledger's old circle, at the top of the outbox
    ("orchestrator/ledger/outbox.py", "\nfrom orchestrator.ledger.spend import Ledger  # noqa\n"),
    # under TYPE_CHECKING, as council/summary.py once named the run
    ("orchestrator/council/summary.py",
     "\nif TYPE_CHECKING:\n    from orchestrator.council.run import CouncilRun\n"),
    # two built-in plugins (rosters imports tiers)
    ("plugins/tiers.py", "\n\ndef _late():\n    import orch_plugins.rosters\n"),
])
def test_the_cycle_check_catches_a_new_cycle(tmp_path, victim, text):
    copy_tree(tmp_path)
    assert cycle(tmp_path) is None
    path = tmp_path / victim
    path.write_text(path.read_text() + text)
    found = cycle(tmp_path)
    assert found is not None and found[0] == found[-1]
