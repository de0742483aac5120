"""Single-file plugins (orchestrator/plugin_host/directory.py): every ``*.py`` of the plugins
directory is a plugin, loaded through the same runner path as an installed one: listed,
isolated when broken, disabled by name (never imported), its options declared, refused when
it shadows an installed name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

STAMP = '''\
"""Every request's last message signed (a single-file plugin)."""
from orchestrator.hookspecs import hookimpl
from orchestrator.options import Option


@hookimpl
def register_options(command):
    if command == "fanout":
        return [Option("stamp-text", type="str", help="What the stamp says.")]


@hookimpl
def before_request(leg, request):
    text = leg.options.get("stamp_text") or "[stamped]"
    last = request.messages[-1]
    signed = {**last, "content": f"{last['content']} {text}"}
    return request.evolve(messages=[*request.messages[:-1], signed])
'''


@pytest.fixture
def plugins_dir(orch_home) -> Path:
    folder = orch_home / "plugins"  # the default: ORCH_HOME/plugins
    folder.mkdir()
    return folder


def _load(**kwargs):
    from orchestrator import runtime
    from orchestrator.plugin_host.plugins import load

    runtime.config.cache_clear()
    warnings: list[str] = []
    pm = load(runtime.config().section("plugins"), warn=warnings.append, **kwargs)
    return pm, warnings


def test_a_plugin_file_loads_is_listed_and_changes_the_wire(orch, scripted_server,
                                                           plugins_dir):
    (plugins_dir / "stamp.py").write_text(STAMP)
    (plugins_dir / "_helper.py").write_text("raise SystemExit('never imported')\n")
    (plugins_dir / "notes.txt").write_text("not a plugin\n")
    pm, warnings = _load()
    info = pm.infos["stamp"]
    assert (info.status, info.source, info.hooks) == \
        ("loaded", "plugins dir", ["before_request", "register_options"])
    assert info.file == str(plugins_dir / "stamp.py") and warnings == []
    assert set(pm.infos) & {"_helper", "notes"} == set()
    run = orch.run_leg("m", "hello", all_installed=True)
    assert run.bodies[0]["messages"][-1]["content"] == "hello [stamped]"
    # registered as the namespace of its hook functions, like an installed third party
    assert type(pm.get_plugin("stamp")).__name__ == "SimpleNamespace"


def test_a_broken_file_is_named_and_isolated(orch, scripted_server, plugins_dir):
    (plugins_dir / "stamp.py").write_text(STAMP)
    (plugins_dir / "broken.py").write_text("import no_such_module_here\n")
    (plugins_dir / "quits.py").write_text("import sys\nsys.exit(3)\n")
    (plugins_dir / "closed.py").write_text("FAIL_CLOSED = True\nraise RuntimeError('boom')\n")
    pm, warnings = _load()
    assert pm.infos["broken"].status == "broken"
    assert "No module named 'no_such_module_here'" in pm.infos["broken"].error
    assert pm.infos["quits"].status == "broken" and "3" in pm.infos["quits"].error
    assert pm.infos["closed"].declared.fail_closed is True  # read from its source, never run
    assert any(w.startswith("plugin broken skipped:") for w in warnings)
    assert pm.infos["stamp"].status == "loaded"
    from orchestrator import runtime
    from orchestrator.plugin_host.fail_closed import GuardUnavailable, require_loaded

    with pytest.raises(GuardUnavailable, match="plugin closed could not be loaded"):
        require_loaded(pm, runtime.config())  # a run relying on it refuses, as for a package
    (plugins_dir / "closed.py").unlink()
    run = orch.run_leg("m", "hello", all_installed=True)  # the broken ones cost nothing else
    assert run.bodies[0]["messages"][-1]["content"] == "hello [stamped]"


def test_a_file_shadowing_an_installed_name_is_refused_and_named(plugins_dir):
    (plugins_dir / "tiers.py").write_text(STAMP)  # a built-in's name
    (plugins_dir / "redact.py").write_text(STAMP)  # examples/orch-redact's name
    pm, warnings = _load()
    assert pm.infos["tiers"].builtin and pm.infos["tiers"].status == "loaded"
    refused = pm.infos["tiers (plugins dir)"]
    assert refused.status == "broken"
    assert refused.error.startswith("the name 'tiers' is taken by the installed plugin from "
                                    "orch; rename ")
    assert str(plugins_dir / "tiers.py") in refused.error
    assert "orch-redact" in pm.infos["redact (plugins dir)"].error
    assert pm.infos["redact"].distribution == "orch-redact"
    assert any("tiers" in w and "rename" in w for w in warnings)


def test_a_disabled_file_is_not_imported(plugins_dir, monkeypatch):
    marker = plugins_dir.parent / "imported"
    (plugins_dir / "noisy.py").write_text(
        f"open({str(marker)!r}, 'w').write('yes')\n" + STAMP)
    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", "noisy")
    pm, _ = _load()
    assert pm.infos["noisy"].status == "disabled"
    assert pm.infos["noisy"].reason == "disabled by ORCH_DISABLE_PLUGINS"
    assert not marker.exists()
    monkeypatch.setenv("ORCH_PLUGINS", "tiers")  # an allowlist that leaves it out
    monkeypatch.delenv("ORCH_DISABLE_PLUGINS")
    pm, _ = _load()
    assert pm.infos["noisy"].status == "disabled" and not marker.exists()


def test_the_kits_isolation_leaves_file_plugins_out(orch, scripted_server, plugins_dir):
    (plugins_dir / "stamp.py").write_text(STAMP)
    run = orch.run_leg("m", "hello")
    assert run.bodies[0]["messages"][-1]["content"] == "hello"


def test_a_files_options_reach_help_and_a_changed_file_is_read_again(plugins_dir, orch_home):
    """The declared options are remembered on disk (option_cache.py); editing, adding or
    removing a plugin file invalidates that."""
    from orchestrator import runtime
    from orchestrator.cli import cli

    runner = CliRunner()
    (plugins_dir / "stamp.py").write_text(STAMP)
    runtime.config.cache_clear()
    assert "--stamp-text" in runner.invoke(cli, ["fanout", "--help"]).output
    assert list((orch_home / "cache").glob("options-fanout-*.json"))  # it was remembered
    (plugins_dir / "stamp.py").write_text(STAMP.replace("stamp-text", "seal-text"))
    help_text = runner.invoke(cli, ["fanout", "--help"]).output
    assert "--seal-text" in help_text and "--stamp-text" not in help_text
    (plugins_dir / "extra.py").write_text(STAMP.replace("stamp-text", "extra-text"))
    assert "--extra-text" in runner.invoke(cli, ["fanout", "--help"]).output
    (plugins_dir / "extra.py").unlink()
    assert "--extra-text" not in runner.invoke(cli, ["fanout", "--help"]).output


def test_config_plugins_dir_is_used(orch, tmp_path):
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "stamp.py").write_text(STAMP)
    orch.config(plugins={"dir": str(folder)})
    pm, _ = _load()
    assert pm.infos["stamp"].status == "loaded"


def test_the_plugins_dir_flag_through_the_real_orch(tmp_path):
    """One real ``orch`` process: ``--plugins-dir`` before the command word loads the files
    (and a broken config value is refused like any other)."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "stamp.py").write_text(STAMP)
    env = {**os.environ, "ORCH_HOME": str(tmp_path / "home"), "ORCH_DAEMON": "off"}
    env.pop("ORCH_PLUGINS_DIR", None)
    orch = str(Path(sys.executable).with_name("orch"))
    done = subprocess.run([orch, "--plugins-dir", str(folder), "plugins", "stamp", "--json"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (info,) = json.loads(done.stdout)["plugins"]
    assert (info["status"], info["source"], info["file"]) == \
        ("loaded", "plugins dir", str(folder / "stamp.py"))
    order = json.loads(done.stdout)["order"]
    assert set(order) == {"before_request", "register_options"}  # NAME: its hooks only
    assert "stamp" in [i["plugin"] for i in order["before_request"]]


def test_from_argv_reads_only_options_before_the_command(monkeypatch):
    from orchestrator.plugin_host.directory import from_argv

    monkeypatch.delenv("ORCH_PLUGINS_DIR", raising=False)
    from_argv(["fanout", "--plugins-dir", "x"])
    assert "ORCH_PLUGINS_DIR" not in os.environ
    from_argv(["--log-json", "--plugins-dir=/d", "plugins"])
    assert os.environ["ORCH_PLUGINS_DIR"] == "/d"


def test_a_file_others_could_write_is_never_run(plugins_dir):
    marker = plugins_dir.parent / "imported"
    shared = plugins_dir / "shared.py"
    shared.write_text(f"open({str(marker)!r}, 'w').write('yes')\n" + STAMP)
    shared.chmod(0o666)
    pm, warnings = _load()
    assert pm.infos["shared"].status == "broken"
    assert pm.infos["shared"].error == \
        f"{shared} is writable by group or others: not run; chmod go-w {shared}"
    assert not marker.exists() and any("chmod go-w" in w for w in warnings)
    shared.chmod(0o644)
    plugins_dir.chmod(0o777)  # the folder counts too: anyone could swap the file
    try:
        pm, _ = _load()
        assert pm.infos["shared"].status == "broken" and not marker.exists()
    finally:
        plugins_dir.chmod(0o755)
    assert _load()[0].infos["shared"].status == "loaded" and marker.exists()


def test_a_named_folder_that_is_missing_is_said(orch_home, tmp_path, monkeypatch):
    from orchestrator.cli import cli

    monkeypatch.setenv("ORCH_PLUGINS_DIR", str(tmp_path / "nope"))
    _, warnings = _load()
    assert warnings == [f"the plugins folder {tmp_path / 'nope'} (ORCH_PLUGINS_DIR) is not a "
                        "folder: no file plugins load"]
    monkeypatch.delenv("ORCH_PLUGINS_DIR")
    wrong = CliRunner().invoke(cli, ["--plugins-dir", str(tmp_path / "nope"), "plugins"])
    assert wrong.exit_code == 2 and "does not exist" in wrong.output


def test_a_files_hooks_cross_the_runner_like_a_packages(orch, scripted_server, plugins_dir):
    """The boundary holds for a file as for a package: an exit is isolated and named, a hook
    past its declared deadline ends the leg PLUGIN_TIMEOUT (nothing sent)."""
    (plugins_dir / "quitter.py").write_text(
        "import sys\nfrom orchestrator.hookspecs import hookimpl\n\n"
        "@hookimpl\ndef before_request(leg, request):\n    sys.exit(0)\n")
    run = orch.run_leg("m", "hello", all_installed=True)
    assert run.leg["status"] == "complete" and len(run.bodies) == 1
    assert [e["plugin"] for e in run.record()["plugin_errors"]] == ["quitter"]
    (plugins_dir / "quitter.py").unlink()
    (plugins_dir / "slow.py").write_text(
        "import threading\nfrom orchestrator.hookspecs import hookimpl\n"
        "HOOK_DEADLINE_S = 0.3\n\n"
        "@hookimpl\ndef before_request(leg, request):\n    threading.Event().wait(3)\n")
    run = orch.run_leg("m", "hello", all_installed=True)
    assert run.leg["status"] != "complete" and run.leg["reason"].startswith("PLUGIN_TIMEOUT:")
    assert "plugin slow's before_request" in run.leg["reason"]
    assert len(scripted_server.requests) == 1  # only the first run's request went out
