"""Smaller fidelity items: the orch version in wave.json, -q hides the "no workspace" notice,
and the optional X-Orch-Wave / X-Orch-Leg headers, shown on the wire."""

from __future__ import annotations

import json

from click.testing import CliRunner

from orchestrator import __version__
from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply


def test_wave_json_records_the_orch_version(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", Reply(text="hi"))
    run = orch.run_leg("m", "hi")
    assert run.doc["orch_version"] == __version__
    on_disk = json.loads((run.runs_dir / run.doc["wave_id"] / "wave.json").read_text())
    assert on_disk["orch_version"] == __version__


def test_headers_are_off_by_default_and_name_the_wave_and_leg_when_on(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", Reply(text="hi"))
    run = orch.run_leg("m", "hi")
    sent = run.requests[-1].headers
    assert "x-orch-wave" not in sent and "x-orch-leg" not in sent
    orch.config(plugin_config={"wire_tags": {"headers": True}})
    run = orch.run_leg("m", "hi")
    sent = run.requests[-1].headers
    assert sent["x-orch-wave"] == run.doc["wave_id"]
    assert sent["x-orch-leg"] == run.leg["leg_id"]


def test_quiet_hides_the_no_workspace_notice(orch, scripted_server, tmp_path, monkeypatch):
    orch.provider()
    scripted_server.script("m", Reply(text="hi"))
    monkeypatch.chdir(tmp_path)  # not a git work tree: tools are off, and orch says so
    loud = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "hi"])
    assert loud.exit_code == 0 and "workspace" in loud.stderr
    quiet = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "hi", "-q"])
    assert quiet.exit_code == 0 and "workspace" not in quiet.stderr
