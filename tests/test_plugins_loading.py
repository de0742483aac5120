"""Finding and choosing plugins: entry points, built-ins, allow/deny, broken plugins, typos,
plugin commands and ``orch plugins``.

Third-party plugins here are real installed distributions: a ``.dist-info`` directory with
``entry_points.txt`` and a module beside it, on ``sys.path`` (in-process) or ``PYTHONPATH``
(for the real ``orch`` in a subprocess).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.plugin_host.declared import add_commands
from orchestrator.plugin_host.plugins import load
from orchestrator.testing.scripted_server import Reply

ROOT = Path(__file__).resolve().parents[1]

# A plugin module that tags the last message with its own name: visible on the wire.
TAGGER = """
from orchestrator.hookspecs import hookimpl

@hookimpl
def before_request(leg, request):
    last = request.messages[-1]
    tagged = {**last, "content": last["content"].rstrip() + " [NAME]"}
    return request.evolve(messages=[*request.messages[:-1], tagged])
"""


class Site:
    """A directory on sys.path where test distributions are installed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.modules: list[str] = []

    def install(self, dist: str, version: str, plugins: dict[str, str],
                modules: dict[str, str] | None = None) -> None:
        """``plugins``: entry-point name -> module source (the module is named after the
        entry point); ``modules``: extra module name -> source."""
        info = self.path / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\n"
                                       f"Version: {version}\n")
        lines = [f"{name} = {self.module(name)}" for name in plugins]
        (info / "entry_points.txt").write_text("[orch]\n" + "\n".join(lines) + "\n")
        for name, source in {**{self.module(n): s for n, s in plugins.items()},
                             **(modules or {})}.items():
            (self.path / f"{name}.py").write_text(textwrap.dedent(source).replace("NAME", name))
            self.modules.append(name)

    @staticmethod
    def module(plugin: str) -> str:
        return "orchtest_" + plugin.replace("-", "_")


@pytest.fixture
def site(tmp_path, monkeypatch):
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    s = Site(path)
    yield s
    for name in s.modules:
        sys.modules.pop(name, None)


def orch_process(*args: str, home: Path, site: Site, **env: str):
    """The real `orch` entry point in a subprocess, with ``site`` on its path."""
    full = dict(os.environ, ORCH_HOME=str(home), PYTHONPATH=str(site.path), **env)
    for name in ("ORCH_PLUGINS", "ORCH_DISABLE_PLUGINS"):
        if name not in env:
            full.pop(name, None)
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], env=full,
                          capture_output=True, text=True, timeout=120)


def plugins_json(**env: str) -> dict[str, dict]:
    result = CliRunner(env=env).invoke(cli, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    return {p["name"]: p for p in json.loads(result.stdout)["plugins"]}


# -- choosing --------------------------------------------------------------------------------

def test_allowlist_and_denylist_from_env_and_config_choose_what_runs(
        orch, scripted_server, site, monkeypatch):
    site.install("orch-test-ab", "1.0", {"alpha": TAGGER, "beta": TAGGER})
    scripted_server.script("m", *[Reply(text="ok")] * 4)

    def wire() -> str:
        return orch.run_leg("m", "hi", all_installed=True).bodies[0]["messages"][-1]["content"]

    assert wire() == "hi [orchtest_beta] [orchtest_alpha]"  # the later-registered first
    monkeypatch.setenv("ORCH_PLUGINS", "beta")
    assert wire() == "hi [orchtest_beta]"
    monkeypatch.delenv("ORCH_PLUGINS")
    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", "beta, alpha")
    assert wire() == "hi"
    monkeypatch.delenv("ORCH_DISABLE_PLUGINS")
    orch.config(plugins={"disabled": ["alpha"]})
    assert wire() == "hi [orchtest_beta]"


def test_orch_plugins_says_what_disabled_a_plugin(orch_home, site, monkeypatch):
    site.install("orch-test-ab", "1.0", {"alpha": TAGGER, "beta": TAGGER})
    listed = plugins_json(ORCH_PLUGINS="alpha,ghost")
    assert listed["alpha"]["status"] == "loaded"
    assert listed["beta"]["status"] == "disabled" and "allowlist" in listed["beta"]["reason"]
    assert listed["beta"]["hooks"] == []
    listed = plugins_json(ORCH_DISABLE_PLUGINS="alpha")
    assert listed["alpha"]["reason"] == "disabled by ORCH_DISABLE_PLUGINS"
    result = CliRunner(env={"ORCH_PLUGINS": "alpha,ghost"}).invoke(cli, ["plugins", "--json"])
    assert json.loads(result.stdout)["unknown_names"] == ["ghost"]


def test_no_plugins_on_fanout_sends_the_bare_request(orch, scripted_server, site):
    site.install("orch-test-ab", "1.0", {"alpha": TAGGER})
    orch.provider()
    scripted_server.script("m", Reply(text="one"), Reply(text="two"))
    with_plugins = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "hi", "--json"])
    bare = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "hi", "--json",
                                    "--no-plugins"])
    assert with_plugins.exit_code == 0 and bare.exit_code == 0, bare.output
    sent = [r.body["messages"][-1]["content"] for r in scripted_server.requests_for("m")]
    assert sent == ["hi [orchtest_alpha]", "hi\n"]


def test_an_in_process_plugin_replaces_the_installed_one_of_the_same_name(
        orch, scripted_server, site):
    from orchestrator.hookspecs import hookimpl

    site.install("orch-test-ab", "1.0", {"alpha": TAGGER})

    class Replacement:
        @hookimpl
        def before_request(self, leg, request):
            return request.evolve(messages=[{"role": "user", "content": "replaced"}])

    scripted_server.script("m", Reply(text="ok"))
    run = orch.run_leg("m", "hi", plugins=[("alpha", Replacement())])
    assert run.bodies[0]["messages"] == [{"role": "user", "content": "replaced"}]


# -- where plugins come from -----------------------------------------------------------------

def test_each_plugin_says_where_it_came_from(orch_home, site):
    site.install("orch-test-ab", "2.5.1", {"alpha": TAGGER})
    listed = plugins_json()
    alpha = listed["alpha"]
    assert (alpha["source"], alpha["version"], alpha["builtin"]) == ("orch-test-ab", "2.5.1",
                                                                    False)
    assert alpha["hooks"] == ["before_request"] and alpha["status"] == "loaded"
    assert alpha["module"] == "orchtest_alpha"
    # built-ins: exactly the entry points orch's own pyproject.toml declares
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    builtins = {name for name, p in listed.items() if p["source"] == "built-in"}
    assert builtins == set(declared.get("orch", {}))
    assert all(p["builtin"] == (p["source"] == "built-in") for p in listed.values())


PIPELINE_HOOKS = {"tool_roster", "before_request", "after_response", "system_prompt",
                  "resolve_model"}


def test_built_in_implementations_are_defaults_marked_trylast(orch_home):
    pm = load()
    for hook in PIPELINE_HOOKS:
        for impl in getattr(pm.hook, hook).get_hookimpls():
            if pm.is_builtin(impl.plugin_name) and not impl.wrapper:
                assert impl.trylast, f"built-in {impl.plugin_name}.{hook} is not trylast"


def test_two_distributions_claiming_one_name_are_reported(orch_home, site):
    site.install("orch-test-one", "1.0", {"same": TAGGER})
    site.install("orch-test-two", "1.0", {"same": TAGGER})
    warnings: list[str] = []
    pm = load(warn=warnings.append)
    clash = [i for i in pm.infos.values() if i.name == "same" and i.status == "broken"]
    assert len(clash) == 1 and "is taken by orch-test-" in clash[0].error
    assert [w for w in warnings if "same" in w] == [f"plugin same skipped: {clash[0].error}"]


# -- broken plugins and typos ----------------------------------------------------------------

BROKEN = "import orchtest_no_such_module  # fails on import\n"
CRASHY_COMMANDS = """
from orchestrator.hookspecs import hookimpl

@hookimpl
def register_commands(cli):
    @cli.command(name="half-made")
    def half_made():
        pass
    raise RuntimeError("cannot add my commands")
"""
HELLO = """
import click
from orchestrator.hookspecs import hookimpl

@hookimpl
def register_commands(cli):
    @cli.command()
    @click.argument("who")
    def hello(who):
        '''Say hello.'''
        click.echo(f"hello {who}")
"""


def test_a_broken_plugin_is_listed_with_its_one_line_error(orch_home, site):
    site.install("orch-test-broken", "0.3", {"broken": BROKEN, "alpha": TAGGER})
    listed = plugins_json()
    assert listed["broken"]["status"] == "broken"
    assert listed["broken"]["error"] == ("ModuleNotFoundError: No module named "
                                         "'orchtest_no_such_module'")
    assert listed["alpha"]["status"] == "loaded"
    human = CliRunner().invoke(cli, ["plugins"])
    assert human.exit_code == 0
    row = next(line for line in human.stdout.splitlines() if line.startswith("broken "))
    assert row.split()[:4] == ["broken", "0.3", "orch-test-broken", "broken"]
    assert "    ModuleNotFoundError: No module named 'orchtest_no_such_module'" in human.stdout


@pytest.mark.slow
def test_with_a_broken_plugin_other_commands_run_and_say_it_once_on_stderr(
        orch, scripted_server, orch_home, site):
    site.install("orch-test-broken", "0.3", {"broken": BROKEN, "alpha": TAGGER,
                                             "crashy": CRASHY_COMMANDS, "hello": HELLO})
    orch.provider()
    scripted_server.script("m", Reply(text="still fine"))
    ran = orch_process("fanout", "-m", "scripted/m", "-p", "hi", "--json", home=orch_home,
                       site=site)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["legs"][0]["answer"] == "still fine"
    assert scripted_server.requests_for("m")[0].body["messages"][-1]["content"] == \
        "hi [orchtest_alpha]"
    *said, totals = ran.stderr.splitlines()
    assert said == [
        "orch: warning: plugin broken skipped: ModuleNotFoundError: No module named "
        "'orchtest_no_such_module'"]
    assert totals.startswith("orch: wave ")  # the run's closing line, also with --json
    # a plugin command still works; the one whose register_commands raised is skipped whole
    hello = orch_process("hello", "world", home=orch_home, site=site)
    assert hello.returncode == 0 and hello.stdout == "hello world\n"
    assert hello.stderr.splitlines() == [
        "orch: warning: plugin broken skipped: ModuleNotFoundError: No module named "
        "'orchtest_no_such_module'",
        "orch: warning: plugin crashy: register_commands failed, its commands are skipped: "
        "RuntimeError: cannot add my commands"]
    helped = orch_process("--help", home=orch_home, site=site)
    assert helped.returncode == 0 and "hello" in helped.stdout
    assert "half-made" not in helped.stdout


TYPO = """
from orchestrator.hookspecs import hookimpl

@hookimpl
def before_requets(leg, request):
    return None

def leg_end(leg, record):  # forgot @hookimpl
    pass
"""


def test_typos_and_unmarked_hooks_are_reported_with_the_plugin_name(orch_home, site):
    site.install("orch-test-typo", "1.0", {"typo": TYPO})
    warnings: list[str] = []
    info = load(warn=warnings.append).infos["typo"]
    assert info.status == "loaded" and info.hooks == []
    assert [w for w in warnings if "typo" in w] == [
        "plugin typo: hook implementation 'before_requets' matches no hook (typo?)",
        "plugin typo: leg_end is not marked @hookimpl, so it never runs"]
    assert plugins_json()["typo"]["warnings"] == [w.removeprefix("plugin typo: ")
                                                  for w in warnings if "typo" in w]


def test_an_argument_the_hook_does_not_have_makes_the_plugin_broken(orch_home, site):
    site.install("orch-test-args", "1.0", {"badargs": """
        from orchestrator.hookspecs import hookimpl

        @hookimpl
        def before_request(leg, request, reqeust_id):
            return None
        """})
    info = load().infos["badargs"]
    assert info.status == "broken" and "reqeust_id" in info.error


# -- plugin commands -------------------------------------------------------------------------

def test_plugin_commands_never_shadow_built_ins_and_a_raising_plugin_is_skipped(orch_home):
    from orchestrator.hookspecs import hookimpl

    class Greeter:
        @hookimpl
        def register_commands(self, cli):
            cli.add_command(click.Command("greet", callback=lambda: click.echo("hi")))
            cli.add_command(click.Command("fanout", callback=lambda: click.echo("hijacked")))

    class Crashy:
        @hookimpl
        def register_commands(self, cli):
            cli.add_command(click.Command("partial"))
            raise ValueError("nope")

    group = click.Group("orch", commands={"status": click.Command("status")})
    warnings: list[str] = []
    pm = load(enabled=False, extra=[("greeter", Greeter()), ("crashy", Crashy())])
    add_commands(pm, group, reserved={"fanout", "status"}, warn=warnings.append)
    assert sorted(group.commands) == ["greet", "status"]
    assert warnings == [
        "plugin crashy: register_commands failed, its commands are skipped: ValueError: nope",
        "plugin greeter: command 'fanout' is built in; skipped"]


def test_the_kit_isolates_from_installed_plugins_unless_asked(orch, scripted_server, site):
    site.install("orch-test-ab", "1.0", {"alpha": TAGGER})
    scripted_server.script("m", *[Reply(text="ok")] * 3)
    alone = orch.run_leg("m", "hi")
    assert alone.bodies[0]["messages"][-1]["content"] == "hi"  # installed, yet not loaded
    everything = orch.run_leg("m", "hi", all_installed=True)
    assert everything.bodies[0]["messages"][-1]["content"] == "hi [orchtest_alpha]"


ALIASED = """
from orchestrator.hookspecs import hookimpl

before_requets = hookimpl(lambda leg, request: None)  # the attribute holds the typo


@hookimpl(specname="leg_endd")  # a typo'd specname
def record_end(leg):
    pass


@hookimpl(specname="before_request")  # fine: found under its specname
def tag(leg, request):
    return None
"""


def test_typos_name_the_attribute_pluggy_found_not_the_function(orch_home, site):
    site.install("orch-test-alias", "1.0", {"aliased": ALIASED})
    info = load().infos["aliased"]
    assert info.hooks == ["before_request"]
    assert info.warnings == [
        "hook implementation 'before_requets' matches no hook (typo?)",
        "hook implementation 'record_end' (specname 'leg_endd') matches no hook (typo?)"]


# -- a light `orch --help` (issue 32 item 7) -------------------------------------------------

# What a command list or a command's help must not import: the built-in plugins' modules and
# what they pull in (pathspec, the credential scanner, the catalog), and the daemon's client.
HEAVY_FOR_HELP = ("orchestrator.models.catalog", "orchestrator.security.credential_content",
                  "orchestrator.daemon.client", "orchestrator.workspace.paths")


@pytest.mark.parametrize("args", [["--help"], ["fanout", "--help"], ["council", "run", "--help"]])
def test_help_imports_no_built_in_plugin_and_no_daemon_client(orch_home, args):
    from orchestrator.testing.imports import imported_by

    out, loaded = imported_by(args, ("orch_plugins", "pathspec", "orchestrator", "litellm"))
    assert out.returncode == 0, out.stderr
    # the built-ins that declare options (BUILTIN_OPTIONS) are loaded for a command's help,
    # light at their top level; no other built-in
    from orchestrator.plugin_host.plugins import BUILTIN_OPTIONS

    declaring = {"orch_plugins", *(f"orch_plugins.{n}" for n in BUILTIN_OPTIONS)} \
        if args != ["--help"] else set()
    heavy = [m for m in loaded if m.split(".")[0] in ("orch_plugins", "pathspec", "litellm")
             and m not in declaring or m in HEAVY_FOR_HELP]
    assert heavy == []


def test_the_built_ins_that_declare_options_are_listed():
    """``orch fanout --help`` loads only BUILTIN_OPTIONS of the built-ins: a built-in that
    gains a ``register_options`` must be named there, or its flags would vanish."""
    from orchestrator.plugin_host.plugins import BUILTIN_OPTIONS

    pm = load(third_party=False)
    declaring = {impl.plugin_name for impl in pm.hook.register_options.get_hookimpls()}
    assert declaring == set(BUILTIN_OPTIONS)


def test_the_built_ins_that_add_commands_are_declared():
    """``orch --help`` loads only BUILTIN_COMMANDS of the built-ins: a built-in that gains a
    ``register_commands`` must be named there, or its commands would vanish from the list."""
    from orchestrator.plugin_host.plugins import BUILTIN_COMMANDS

    pm = load(third_party=False)
    adders = {impl.plugin_name for impl in pm.hook.register_commands.get_hookimpls()}
    assert adders == set(BUILTIN_COMMANDS)
