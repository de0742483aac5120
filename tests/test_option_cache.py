"""The declared options remembered on disk (plugin_host/option_cache.py): a second `--help`
imports no declaring plugin, and every change the declarations depend on is seen at once: the
plugin's code edited, the plugin disabled, its distribution removed, another installed.

The real `orch` entry point in a subprocess; the plugin's module counts its imports in a file
beside the site folder (a file created inside it would change the folder, as an install does).
"""

from __future__ import annotations

import os
import shutil

import pytest
from test_plugins_loading import orch_process, site  # noqa: F401 - the fixture

DECLARES = """
from pathlib import Path
from orchestrator.hookspecs import hookimpl
from orchestrator.options import Option

with open(Path(__file__).parent.parent / (Path(__file__).stem + ".imports"), "a") as f:
    f.write("x")

@hookimpl
def register_options(command):
    return [Option("FLAG", "int", min=1, metavar="N", help="HELP")]
"""


def plugin(flag: str, help_text: str) -> str:
    return DECLARES.replace("FLAG", flag).replace("HELP", help_text)


@pytest.fixture
def counted(site):  # noqa: F811 - the fixture imported above
    site.install("orch-counted", "1.0", {"counted": plugin("max-words", "At most N words.")})
    return site


def imports(where) -> int:
    path = where.path.parent / f"{where.module('counted')}.imports"  # not in the site folder
    return len(path.read_text()) if path.exists() else 0


def helped(home, where, **env) -> str:
    ran = orch_process("fanout", "--help", home=home, site=where, **env)
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


def test_a_second_help_imports_no_declaring_plugin(orch_home, counted):
    assert "--max-words N" in helped(orch_home, counted)
    assert imports(counted) == 1
    for _ in range(2):
        assert "--max-words N" in helped(orch_home, counted)
    assert imports(counted) == 1  # remembered: the plugin was not imported again
    assert list((orch_home / "cache").glob("options-fanout-*.json"))


def test_an_edited_declaration_is_seen_at_once(orch_home, counted):
    helped(orch_home, counted)
    module = counted.path / f"{counted.module('counted')}.py"
    module.write_text(plugin("max-lines", "At most N lines, and a longer help."))
    shown = helped(orch_home, counted)
    assert "--max-lines N" in shown and "--max-words" not in shown
    assert imports(counted) == 2


def test_disabling_or_removing_the_plugin_removes_its_option(orch_home, counted):
    assert "--max-words" in helped(orch_home, counted)
    assert "--max-words" not in helped(orch_home, counted, ORCH_DISABLE_PLUGINS="counted")
    assert "--max-words" in helped(orch_home, counted)
    config = orch_home / "config.json"
    config.write_text('{"plugins": {"disabled": ["counted"]}}')
    assert "--max-words" not in helped(orch_home, counted)
    config.write_text("{}")
    assert "--max-words" in helped(orch_home, counted)
    shutil.rmtree(counted.path / "orch_counted-1.0.dist-info")  # uninstalled
    os.utime(counted.path)  # as pip leaves it: the folder changed in this same second
    assert "--max-words" not in helped(orch_home, counted)


def test_installing_another_plugin_shows_its_option(orch_home, counted):
    helped(orch_home, counted)
    counted.install("orch-other", "1.0", {"other": plugin("max-bullets", "At most N bullets.")})
    shown = helped(orch_home, counted)
    assert "--max-bullets N" in shown and "--max-words N" in shown


def test_a_broken_cache_file_is_read_past(orch_home, counted):
    helped(orch_home, counted)
    for path in (orch_home / "cache").glob("options-fanout-*.json"):
        path.write_text('{"key": [1, 2')
    assert "--max-words N" in helped(orch_home, counted)
    assert imports(counted) == 2


def test_help_creates_no_orch_home(tmp_path, counted):
    home = tmp_path / "nohome"
    assert "--max-words N" in helped(home, counted)
    assert not home.exists()
