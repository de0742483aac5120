"""Per-run budgets in ``orch ui``'s ask form, and the one check of a budget's value every face
shares (orchestrator/option_values.py): the form renders a field per budget the plugins that
are on declare; a bad value, a field for a plugin that is off or an unknown field is one line
on the page with nothing sent and nothing recorded; a ceiling set in the form stops the run as
the CLI's flag does; the CLI, ``orch mcp`` and the form accept and refuse the same values in
the same words; an AST walk shows each face's check of a value is the shared one. And
``/ask/ID`` after ``orch ui`` restarts shows the recorded run."""

from __future__ import annotations

import ast
import html
import json
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from test_ui_ask import ASK, InProcess, ledger_rows, ui, waves  # noqa: F401 - ui: a fixture

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

ROOT = Path(__file__).resolve().parents[1]
TINY = "0.000001"  # a ceiling no request fits: the first request is never sent


def error_line(body: bytes) -> str:
    found = re.search(rb'<p class="error" id="ask-error">(.*?)</p>', body, re.S)
    assert found, body[:3000]
    return html.unescape(found[1].decode())


HOSTILE = {  # form fields -> words the one line on the page holds
    "nan": ({"budget.max_cost": "nan"}, "--max-cost: 'nan' is not a finite number"),
    "inf": ({"budget.max_cost": "inf"}, "--max-cost: 'inf' is not a finite number"),
    "-inf": ({"budget.max_cost": "-Infinity"}, "is not a finite number"),
    "1e999": ({"budget.max_cost": "1e999"}, "--max-cost: '1e999' is not a finite number"),
    "negative": ({"budget.max_cost": "-1"}, "--max-cost: '-1' must be at least 0"),
    "text": ({"budget.max_cost": "abc"}, "--max-cost: 'abc' is not a number"),
    "a bool": ({"budget.max_cost": "true"}, "--max-cost: 'true' is not a number"),
    "not whole": ({"budget.output_budget": "2.5"}, "--output-budget: '2.5' is not a whole"),
    "zero tokens": ({"budget.output_budget": "0"}, "--output-budget: '0' must be at least 1"),
    "open minimum": ({"budget.leg_seconds": "0"}, "--leg-seconds: '0' must be more than 0"),
    "a choice": ({"budget.thinking": "<b>max</b>"}, "is not one of none, minimal"),
    "a megabyte": ({"budget.max_cost": "9" * 1_000_000}, "999… is not a finite number"),
    "a long name": ({"budget." + "x" * 10_000: "1"}, "--xxxx"),
    "unknown budget": ({"budget.no_such": "1"}, "--no-such is not an option of fanout"),
    "unknown field": ({"max_cost": "1"}, "the form has no field 'max_cost'"),
    "a fanout budget on a bench": ({"kind": "bench", "budget.output_budget": "100"},
                                   "--output-budget is not an option of bench"),
}


def test_every_hostile_budget_in_the_form_is_refused_with_nothing_sent_or_recorded(
        ui, scripted_server, orch_home):  # noqa: F811 - the fixture
    for why, (fields, words) in HOSTILE.items():
        resp = ui.post("/ask", {**ASK, **fields}, token=ui.form_token())
        assert resp.status == 400, (why, resp.status)
        line = error_line(resp.body)
        assert words in line and "\n" not in line and len(line) < 300, (why, line[:400])
        assert b"form_token" in resp.body  # the form again, with a fresh token
    assert scripted_server.count() == 0  # nothing on the wire
    assert waves(orch_home) == [] and ledger_rows(orch_home) == []  # nothing recorded


def test_a_budget_field_for_a_plugin_that_is_off_is_refused_and_not_rendered(
        ui, scripted_server, orch_home, monkeypatch):  # noqa: F811 - the fixture
    from orchestrator import runtime

    page = ui.request("GET", "/ask", headers={"Cookie": ui.cookie}).body.decode()
    assert 'name="budget.max_cost"' in page and "[unit: USD]" in page  # the help, said
    assert 'name="budget.output_budget"' in page and 'name="budget.thinking"' in page
    monkeypatch.setenv("ORCH_DISABLE_PLUGINS", "cost_ceiling")
    runtime.plugin_manager.cache_clear()
    page = ui.request("GET", "/ask", headers={"Cookie": ui.cookie}).body.decode()
    assert 'name="budget.max_cost"' not in page and 'name="budget.output_budget"' in page
    resp = ui.post("/ask", {**ASK, "budget.max_cost": "5"}, token=ui.form_token())
    assert resp.status == 400
    assert error_line(resp.body).startswith(
        "--max-cost needs the cost_ceiling plugin, which is not loaded (it is disabled")
    assert scripted_server.count() == 0
    assert waves(orch_home) == [] and ledger_rows(orch_home) == []


def test_a_ceiling_set_in_the_form_stops_the_run_as_the_clis_flag_does(
        ui, scripted_server, orch_home):  # noqa: F811 - the fixture
    for model in ("alpha", "bravo"):
        scripted_server.script(model, Reply(text="never sent"), Reply(text="never sent"))
    resp = ui.post("/ask", {**ASK, "budget.max_cost": TINY}, token=ui.form_token())
    assert resp.status == 303, resp.body[:2000]
    run_id = resp.getheader("Location").rsplit("/", 1)[1]
    ended = ui.wait(run_id)[-1]
    assert scripted_server.count() == 0  # the ceiling held: no request was sent
    from_form = json.loads((orch_home / "runs" / run_id / "wave.json").read_text())
    cli_run = CliRunner().invoke(cli, ["fanout", "-m", "scripted/alpha,scripted/bravo", "-p",
                                       ASK["prompt"], "--max-cost", TINY, "--json"])
    assert scripted_server.count() == 0
    from_cli = json.loads(cli_run.stdout)
    assert ended == {"type": "ended", "exit_code": cli_run.exit_code}
    assert from_form["options"]["max_cost"] == from_cli["options"]["max_cost"] == float(TINY)
    for doc in (from_form, from_cli):
        assert [leg["status"] for leg in doc["legs"]] == ["refused", "refused"]
        assert all(leg["reason"].startswith("COST_CEILING") for leg in doc["legs"])
        assert [r["model"] for r in doc["budget_refusals"]] == ["scripted/alpha",
                                                                "scripted/bravo"]
    assert [leg["reason"] for leg in from_form["legs"]] == \
        [leg["reason"] for leg in from_cli["legs"]]
    # a budget that shapes the request (not a ceiling) reaches the wire as the flag's does
    resp = ui.post("/ask", {**ASK, "budget.output_budget": "77"}, token=ui.form_token())
    ui.wait(resp.getheader("Location").rsplit("/", 1)[1])
    sent = scripted_server.chats
    assert len(sent) == 2 and {r.body.get("max_tokens") for r in sent} == {77}


# --- the three faces accept and refuse the same values, in the same words --------------------

VALUES = ["2.5", "0", "-1", "nan", "inf", "1e999", "abc", "", " 3 ", "1e-3", 2, 2.5, -0.5,
          True, float("nan"), float("inf"), 10 ** 400, [1]]


@pytest.mark.parametrize("key", ["max_cost", "output_budget", "leg_seconds", "thinking"])
def test_the_cli_the_mcp_tools_and_the_form_agree_on_every_value(orch, key):
    """Each face's own way in: click's conversion of the flag, the MCP tool's budgets, the
    form's budgets; a value each takes is the same value, a refusal the same words."""
    from orchestrator import runtime
    from orchestrator.cli.plugin_options import click_option
    from orchestrator.errors import OrchError
    from orchestrator.mcp_server import tools
    from orchestrator.option_values import declared_on
    from orchestrator.ui.ask import budgets_of

    pm = runtime.plugin_manager()
    option = next(o for _, o in declared_on(pm, "fanout") if o.key == key)
    param = click_option(option)
    assert tools._budgets({key: None}, "fanout") == {}  # a JSON null: not given
    for value in VALUES:
        faces = {}
        try:
            faces["cli"] = ("ok", param.type.convert(value, param, None))
        except click.BadParameter as exc:
            faces["cli"] = ("refused", exc.message)
        text = value if isinstance(value, str) else json.dumps(value)
        try:
            faces["ui"] = ("ok", budgets_of({f"budget.{key}": [text]}, "fanout", pm)[key])
        except OrchError as exc:
            faces["ui"] = ("refused", str(exc).split(": ", 1)[1])
        except KeyError:  # an empty field is not given
            faces["ui"] = ("ok", None)
        if option.mcp:
            try:
                faces["mcp"] = ("ok", tools._budgets({key: value}, "fanout").get(key))
            except OrchError as exc:
                faces["mcp"] = ("refused", str(exc).split(": ", 1)[1])
        if value == "":  # a form's empty field is "not set"; an empty flag is refused
            assert faces["ui"] == ("ok", None) and faces["cli"][0] == "refused"
            continue
        if isinstance(value, str):
            assert faces["cli"] == faces["ui"], (value, faces)
        elif "mcp" in faces:  # a JSON value: the MCP face and the click type take it alike
            assert faces["cli"] == faces["mcp"], (value, faces)
        if value in ("nan", "inf", "1e999", "abc", True, 10 ** 400) or (
                isinstance(value, float) and value != value) or isinstance(value, list):
            assert {v[0] for v in faces.values()} == {"refused"}, (value, faces)


# --- each face's check of a value is the shared one ------------------------------------------

FACES = ("cli", "mcp_server", "ui", "daemon")
SHARED = "orchestrator.option_values"
# what checks a number or a declared option's value by itself, instead of calling the check
CHECKS = {"isfinite", "IntRange", "FloatRange", "Choice"}
BOUNDS = {"min", "max", "min_open", "choices"}  # a declared option's bounds, read to check
# the JSON Schema and click's --help listing of a choice: they say, they do not check
RENDERS = {("mcp_server/schemas.py", "option_property"), ("cli/params.py", "__init__")}


def value_check_problems(sources: dict[str, str]) -> list[str]:
    """Where a face checks a value itself: a click ParamType whose ``convert`` does not call
    the shared check, a finiteness/range/choice check of its own, a declared option's bounds
    read outside the renderers of its description, or a plugin option's click type that is
    not the shared one's."""
    problems = []
    for name, text in sources.items():
        tree = ast.parse(text)
        shared = {a.asname or a.name for n in ast.walk(tree)
                  if isinstance(n, ast.ImportFrom) and n.module == SHARED for a in n.names}
        for func in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            calls = {c.func.attr if isinstance(c.func, ast.Attribute) else
                     getattr(c.func, "id", "") for c in ast.walk(func) if isinstance(c, ast.Call)}
            attrs = {a.attr for a in ast.walk(func) if isinstance(a, ast.Attribute)}
            where = f"{name}:{func.name}"
            if func.name == "convert" and not calls & shared:
                problems.append(f"{where}: a click type that does not call {SHARED}")
            for bad in sorted(calls & CHECKS):
                if name.startswith("cli/") and bad in ("IntRange", "Choice") \
                        and "option" not in {a.id for a in ast.walk(func)
                                             if isinstance(a, ast.Name)}:
                    continue  # a built-in flag's own range (--rounds 1..20), not a budget
                problems.append(f"{where}: checks a value itself ({bad})")
            if "option" in {a.arg for a in func.args.args} and attrs & BOUNDS \
                    and (name, func.name) not in RENDERS:
                problems.append(f"{where}: reads a declared option's bounds "
                                f"({', '.join(sorted(attrs & BOUNDS))})")
    return problems


def face_sources() -> dict[str, str]:
    base = ROOT / "orchestrator"
    return {str(p.relative_to(base)): p.read_text() for face in FACES
            for p in sorted((base / face).rglob("*.py"))}


def test_every_faces_check_of_a_budget_value_is_the_shared_one():
    sources = face_sources()
    assert value_check_problems(sources) == []
    # each face's way in calls the shared check
    calls = {name: {c.func.id if isinstance(c.func, ast.Name) else getattr(c.func, "attr", "")
                    for c in ast.walk(ast.parse(text)) if isinstance(c, ast.Call)}
             for name, text in sources.items()}
    assert "given" in calls["mcp_server/tools.py"]  # the MCP tools' budgets
    assert "given" in calls["ui/ask.py"]  # the form's budgets
    assert {"checked", "number"} <= calls["cli/params.py"]  # the click types
    assert {"Declared", "DeclaredChoice"} <= calls["cli/plugin_options.py"]
    # and a bypass is caught: a click type of its own, a finiteness check, a bound read
    bypasses = [
        "import click\nclass T(click.ParamType):\n    def convert(self, v, p, c):\n"
        "        return float(v)\n",
        "import math\ndef f(x):\n    return math.isfinite(x)\n",
        "def click_option(option):\n    return click.IntRange(option.min, option.max)\n",
        "def budgets(option, value):\n    return value if value >= option.min else None\n",
        "def field(option):\n    return click.Choice(option.choices)\n",
    ]
    for text in bypasses:
        assert value_check_problems({"cli/x.py": text}), text


# --- /ask/ID after orch ui restarts ----------------------------------------------------------

def test_a_run_asked_from_the_page_is_shown_from_its_record_after_a_restart(
        ui, scripted_server, orch_home):  # noqa: F811 - the fixture
    scripted_server.script("alpha", Reply(text="blue"))
    scripted_server.script("bravo", Reply(text="red"))
    resp = ui.post("/ask", ASK, token=ui.form_token())
    run_id = resp.getheader("Location").rsplit("/", 1)[1]
    ui.wait(run_id)
    ui.close()  # orch ui stops: the runs it held in memory are gone
    again = InProcess(orch_home / "runs", ui.view.ask.workspace)
    try:
        page = again.request("GET", f"/ask/{run_id}", headers={"Cookie": again.cookie})
        assert page.status == 303 and page.getheader("Location") == f"/wave/{run_id}"
        shown = again.request("GET", f"/wave/{run_id}", headers={"Cookie": again.cookie})
        assert shown.status == 200 and b"blue" in shown.body and b"red" in shown.body
        poll = again.request("GET", f"/ask/{run_id}/events.json?after=3",
                             headers={"Cookie": again.cookie})
        assert json.loads(poll.body) == {"events": [], "next": 0, "done": True, "answers": {},
                                         "kind": "wave", "record": f"/wave/{run_id}"}
        missing = again.request("GET", "/ask/20261208-000000-nosuch",
                                headers={"Cookie": again.cookie})
        assert missing.status == 404 and b"or recorded" in missing.body
    finally:
        again.close()
        ui.close = lambda: None  # closed above
    assert scripted_server.count() == 2  # showing a record sends nothing
