"""A run ceiling is found in the plugins' declarations (``Option.run_ceiling``), never by
name: a third party's ceiling is handed to each stage of a council as what the run has left
of it, and run.json records it under its key, as cost_ceiling's ``max_cost`` is."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from test_council_run import SEATS, script_bench
from test_plugins_loading import site  # noqa: F401 - the fixture

from orchestrator.cli import cli

# A third-party run ceiling: the core must hand each wave what the run has left of it.
EUROCAP = """
from orchestrator.hookspecs import hookimpl
from orchestrator.options import Option

@hookimpl
def register_options(command):
    return [Option("max-euros", type="float", min=0, metavar="EUR", run_ceiling=True,
                   help="A ceiling in euros over the whole run.")]
"""


@pytest.fixture
def eurocap(site):  # noqa: F811 - the fixture imported above
    site.install("orch-eurocap", "1.0", {"eurocap": EUROCAP})
    return site


def test_each_council_stage_gets_what_the_run_has_left_of_a_declared_ceiling(
        orch, scripted_server, orch_home, eurocap):
    orch.provider(input_cost_per_mtok=1000.0, output_cost_per_mtok=1000.0)
    script_bench(scripted_server)
    result = CliRunner().invoke(cli, ["council", "run", "-p", "Review this.", "-m", SEATS,
                                      "--chair", "scripted/delta", "--json",
                                      "--max-euros", "100"])
    assert result.exit_code in (0, 2), result.output
    doc = json.loads(result.stdout)
    assert doc["max_euros"] == 100 and doc["max_cost"] is None
    assert "max_euros" not in doc["options"]  # the run's, not each stage's as given
    waves = orch_home / "runs" / f"council-{doc['run_id']}" / "waves"
    stages = {s["name"]: json.loads((waves / f"{doc['run_id']}-{s['name']}" /
                                     "wave.json").read_text())
              for s in doc["stages"]}
    assert stages["review"]["options"]["max_euros"] == 100
    reviews = sum(leg["cost_usd"] for leg in stages["review"]["legs"])
    assert reviews > 0
    assert stages["judge"]["options"]["max_euros"] == pytest.approx(100 - reviews)
