"""Order said, not guessed (orchestrator/plugin_host/order.py): a plugin's ``AFTER`` / ``BEFORE``
place its hooks relative to the built-ins, and ``orch plugins`` prints each hook's order."""

from __future__ import annotations

import json
import types
from dataclasses import dataclass

from click.testing import CliRunner

from orchestrator.errors import Refusal
from orchestrator.hookspecs import hookimpl
from orchestrator.plugin_host.order import arrange, constraint, cycles


def house_ceiling(after: list[str] | None) -> types.ModuleType:
    """The ceiling pattern of docs/plugins.md: a guard that needs ``max_tokens`` (set by the
    built-in output_budget) to price a request's worst case, refusing what could pass 60."""
    module = types.ModuleType("house_ceiling")
    module.NAME = "house_ceiling"
    if after is not None:
        module.AFTER = after

    @hookimpl
    def before_request(leg, request):
        reserved = request.params.get("max_tokens")
        if reserved is None:
            raise Refusal("HOUSE_CEILING", "no output reservation to price")
        if reserved > 60:
            raise Refusal("HOUSE_CEILING", f"{reserved} reserved tokens pass the house's 60")
        leg.set("house_priced", reserved)
        return None

    module.before_request = before_request
    return module


def test_a_guard_after_the_output_budget_sees_max_tokens_on_the_wire(orch, scripted_server):
    """AFTER = ["output_budget"]: the guard prices the reservation that is then sent."""
    run = orch.run_leg("m", "hi", plugins=[house_ceiling(["output_budget"])],
                       options={"output_budget": 50})
    assert run.leg["status"] == "complete", run.leg
    assert run.bodies[0]["max_tokens"] == 50
    assert run.record()["house_priced"] == 50  # what it priced is what went out


def test_a_guard_after_the_output_budget_refuses_before_the_wire(orch, scripted_server):
    run = orch.run_leg("m", "hi", plugins=[house_ceiling(["output_budget"])],
                       options={"output_budget": 500})
    assert run.leg["status"] == "refused"
    assert run.leg["reason"].startswith("HOUSE_CEILING: 500 reserved tokens")
    assert run.bodies == []  # nothing was sent


def test_without_the_declaration_the_guard_runs_before_the_budget_is_set(orch,
                                                                         scripted_server):
    """The failure the issue met: in pluggy's order a third party runs before every
    built-in, so ``max_tokens`` is not set yet (this is what AFTER fixes)."""
    run = orch.run_leg("m", "hi", plugins=[house_ceiling(None)],
                       options={"output_budget": 50})
    assert run.leg["status"] == "refused"
    assert "no output reservation to price" in run.leg["reason"]
    assert run.bodies == []


def test_orch_plugins_prints_each_hooks_order(orch_home, tmp_path, monkeypatch):
    from orchestrator.cli import cli

    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "house.py").write_text(
        "from orchestrator.hookspecs import hookimpl\n"
        "AFTER = ['output_budget']\n"
        "BEFORE = {'before_request': ['tiers']}\n"
        "@hookimpl\n"
        "def before_request(leg, request):\n"
        "    return None\n")
    (folder / "typo.py").write_text(
        "from orchestrator.hookspecs import hookimpl\n"
        "AFTER = ['output_budgte']\n"
        "@hookimpl\n"
        "def leg_end(leg, record):\n"
        "    return None\n")
    monkeypatch.setenv("ORCH_PLUGINS_DIR", str(folder))
    runner = CliRunner()
    out = runner.invoke(cli, ["plugins", "--json"])
    assert out.exit_code == 0, out.output
    chain = [i["plugin"] for i in json.loads(out.output)["order"]["before_request"]
             if not i["wrapper"]]
    assert chain.index("output_budget") < chain.index("house") < chain.index("tiers")
    problems = json.loads(out.output)["order_problems"]
    assert any("typo" in p and "output_budgte" in p for p in problems)
    text = runner.invoke(cli, ["plugins"]).output
    line = next(row for row in text.splitlines() if row.startswith("before_request "))
    assert "output_budget > house" in line
    assert "ORDER (first to last" in text


@dataclass
class Impl:
    plugin: str
    wrapper: bool = False


@dataclass
class Said:
    after: tuple = ()
    before: tuple = ()


def test_arrange_keeps_pluggys_order_but_where_a_constraint_moves_one():
    impls = [Impl("mine"), Impl("tiers"), Impl("output_budget"), Impl("cost_ceiling"),
             Impl("guard", wrapper=True)]
    said = {"mine": Said(after=constraint("AFTER", ["output_budget"], []))}
    order = [i.plugin for i in arrange(impls, "before_request", lambda n: said.get(n, Said()))]
    assert order == ["guard", "tiers", "output_budget", "mine", "cost_ceiling"]
    only_other_hook = {"mine": Said(after=constraint("AFTER", {"leg_end": ["output_budget"]},
                                                     []))}
    order = [i.plugin for i in arrange(impls, "before_request",
                                       lambda n: only_other_hook.get(n, Said()))]
    assert order == ["guard", "mine", "tiers", "output_budget", "cost_ceiling"]


def test_contradictions_keep_pluggys_order_and_are_named():
    impls = [Impl("a"), Impl("b"), Impl("c")]
    said = {"a": Said(after=(("*", ("b",)),)), "b": Said(after=(("*", ("a",)),))}
    of = lambda n: said.get(n, Said())  # noqa: E731
    assert [i.plugin for i in arrange(impls, "h", of)] == ["c", "a", "b"]
    assert cycles(impls, "h", of) == ["a", "b"]


def test_an_unreadable_constraint_is_ignored_with_a_warning():
    warnings: list[str] = []
    assert constraint("AFTER", 3, warnings) == ()
    assert warnings and "AFTER = 3" in warnings[0]
    assert constraint("BEFORE", "tiers", []) == (("*", ("tiers",)),)

