import orch_house_rules
from click.testing import CliRunner

from orchestrator.testing.scripted_server import Reply

PLUGIN = [orch_house_rules]


def test_a_production_host_is_refused_and_nothing_is_sent(orch, scripted_server):
    run = orch.run_leg("m", "Why is db1.prod.internal slow?", plugins=PLUGIN)
    assert run.bodies == [] and run.leg["reason"].startswith("PROD_HOSTNAME:")


def test_the_model_can_look_terms_up(orch, scripted_server):
    scripted_server.script("m", Reply(tool_calls=[{"name": "lookup",
                                                   "arguments": {"term": "Wave"}}]),
                           Reply(text="ok"))
    run = orch.run_leg("m", "what is a wave?", plugins=PLUGIN)
    assert run.bodies[1]["messages"][-1]["content"] == "one briefing run on several models"


def test_the_command_lists_the_hosts(orch, orch_home):
    orch.config(plugin_config={"house_rules": {"hosts": ["db.corp"]}})
    done = CliRunner().invoke(orch_house_rules.house_rules_command)
    assert done.stdout == "db.corp\n"
