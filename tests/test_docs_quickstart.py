"""docs/plugins.md's own code runs: the quick start's plugin and its test, and the ceiling
pattern of its Order section. A fenced ``python`` block whose first line is ``# NAME.py`` is a
file; ``test_NAME.py`` is run against ``NAME.py`` the way pytest would, with the kit's
fixtures, and the quick start's promised sizes are held."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"
BLOCK = re.compile(r"```python\n# (?P<name>\w+\.py)\n(?P<body>.*?)```", re.S)


def files() -> dict[str, str]:
    """{file name: its source} for every named python block of the page."""
    return {m["name"]: m["body"] for m in BLOCK.finditer(DOC.read_text(encoding="utf-8"))}


def run_page_tests(plugin: str, folder: Path, fixtures: dict,
                   blocks: dict[str, str] | None = None) -> int:
    """Write ``plugin`` and ``test_<plugin>`` from the page into ``folder`` and call each test
    function with the fixtures it names; how many ran."""
    blocks = blocks or files()
    (folder / plugin).write_text(blocks[plugin], encoding="utf-8")
    module_name = plugin.removesuffix(".py")
    sys.path.insert(0, str(folder))
    try:
        importlib.import_module(module_name)
        namespace: dict = {"__name__": f"test_{module_name}"}
        exec(compile(blocks[f"test_{plugin}"], f"test_{plugin}", "exec"), namespace)  # noqa: S102
        tests = [f for n, f in namespace.items() if n.startswith("test_") and callable(f)]
        for test in tests:
            test(**{p: fixtures[p] for p in inspect.signature(test).parameters})
        return len(tests)
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(module_name, None)


def test_the_quick_start_is_short_and_its_test_passes(orch, scripted_server, tmp_path):
    blocks = files()
    plugin, test = blocks["house_rules.py"], blocks["test_house_rules.py"]
    assert len(plugin.rstrip().splitlines()) + 1 < 30  # + its "# house_rules.py" line
    assert len(test.rstrip().splitlines()) + 1 < 10
    assert run_page_tests("house_rules.py", tmp_path, {"orch": orch,
                                                       "scripted_server": scripted_server}) == 1


def test_the_quick_start_file_is_a_plugin_in_the_plugins_folder(orch_home):
    """Saved where the page says, it is listed, and its option reaches ``orch fanout``."""
    from click.testing import CliRunner

    from orchestrator import runtime
    from orchestrator.cli import cli
    from orchestrator.plugin_host.plugins import load

    folder = orch_home / "plugins"
    folder.mkdir()
    (folder / "house_rules.py").write_text(files()["house_rules.py"], encoding="utf-8")
    (folder / "test_house_rules.py").write_text(files()["test_house_rules.py"])
    runtime.config.cache_clear()
    pm = load(runtime.config().section("plugins"))
    assert pm.infos["house_rules"].status == "loaded"
    assert pm.infos["house_rules"].hooks == ["before_request", "register_options",
                                             "system_prompt"]
    assert "test_house_rules" not in pm.infos  # its test beside it is no plugin
    assert "--max-words" in CliRunner().invoke(cli, ["fanout", "--help"]).output


def test_the_ceiling_pattern_runs_after_the_budget(orch, scripted_server, tmp_path):
    assert 'AFTER = ["output_budget"]' in files()["reserve_cap.py"]
    assert run_page_tests("reserve_cap.py", tmp_path, {"orch": orch,
                                                       "scripted_server": scripted_server}) == 1


def test_without_its_after_line_the_ceiling_refuses_everything(orch, scripted_server,
                                                               tmp_path):
    """What the page says happens without ``AFTER`` (so the test above can fail)."""
    blocks = files()
    blocks["reserve_cap.py"] = blocks["reserve_cap.py"].replace('AFTER = ["output_budget"]', "")
    with pytest.raises((AssertionError, IndexError)):  # its test fails: nothing was sent
        run_page_tests("reserve_cap.py", tmp_path, {"orch": orch,
                                                    "scripted_server": scripted_server}, blocks)
    assert scripted_server.requests == []  # every request was refused before the wire
