"""A retry (``--retry-failed``) and a follow-up (``--continue``) keep the wave's leg limits
(``--timeout``, ``--max-steps``, recorded in wave.json as ``leg_limits``) unless the new
command gives its own; a wave recorded before them runs on the defaults; a tampered value is
refused in one line with nothing sent (engine/leg_limits.py)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.testing.daemon import invoke
from orchestrator.testing.scripted_server import Reply

ROOT = Path(__file__).resolve().parents[1]


def looping(body, n: int) -> Reply:
    """A leg that never stops calling a tool (each call another, so no doom-loop stop)."""
    return Reply(tool_calls=[{"name": "list", "arguments": {"path": f"d{n}"}}])


def fanout(*args: str) -> dict:
    done = invoke(["fanout", "--tools", "read", "--json", *args])
    assert done.exit_code in (0, 1, 2), done.output
    return json.loads(done.stdout)


def wave_json(runs: Path, wave_id: str) -> Path:
    return runs / wave_id / "wave.json"


def failed_wave(scripted_server, ws: Path, *limits: str) -> str:
    """A wave whose one leg failed, run with ``limits``."""
    scripted_server.script("a", Reply(status=400, text="no"))
    doc = fanout("-m", "scripted/a", "-p", "List it.", "--workspace", str(ws), *limits)
    assert doc["status"] == "error"
    return doc["wave_id"]


def answered_wave(scripted_server, ws: Path, *limits: str) -> str:
    scripted_server.script("a", Reply(text="a: it is there"))
    doc = fanout("-m", "scripted/a", "-p", "List it.", "--workspace", str(ws), *limits)
    assert doc["status"] == "complete"
    return doc["wave_id"]


@pytest.mark.parametrize("now, sent", [((), 2), (("--max-steps", "3"), 3)])
def test_a_retry_keeps_the_waves_max_steps_unless_given_now(orch, scripted_server, tmp_path,
                                                              now, sent):
    orch.provider()
    wave = failed_wave(scripted_server, tmp_path, "--max-steps", "2", "--timeout", "30")
    doc = json.loads(wave_json(orch.home / "runs", wave).read_text())
    assert doc["leg_limits"] == {"timeout_s": 1800.0, "max_steps": 2}
    before = scripted_server.count("a")
    scripted_server.script("a", looping)
    retried = fanout("--retry-failed", wave, *now)
    assert scripted_server.count("a") - before == sent  # on the wire: exactly that many
    assert retried["legs"][0]["stopped"] == "max_steps"
    assert retried["leg_limits"] == {"timeout_s": 1800.0, "max_steps": sent}


@pytest.mark.parametrize("now, sent", [((), 2), (("--max-steps", "4"), 4)])
def test_a_follow_up_keeps_the_waves_max_steps_unless_given_now(orch, scripted_server,
                                                                 tmp_path, now, sent):
    orch.provider()
    wave = answered_wave(scripted_server, tmp_path, "--max-steps", "2")
    before = scripted_server.count("a")
    scripted_server.script("a", looping)
    followed = fanout("--continue", wave, "And the rest?", *now)
    assert scripted_server.count("a") - before == sent
    assert followed["parent_wave_id"] == wave
    assert followed["legs"][0]["stopped"] == "max_steps"
    assert followed["leg_limits"]["max_steps"] == sent


@pytest.mark.usefixtures("both_ways")
def test_a_retry_run_by_the_daemon_keeps_them_too(orch, scripted_server, tmp_path):
    orch.provider()
    wave = failed_wave(scripted_server, tmp_path, "--max-steps", "2")
    before = scripted_server.count("a")
    scripted_server.script("a", looping)
    assert fanout("--retry-failed", wave)["leg_limits"]["max_steps"] == 2
    assert scripted_server.count("a") - before == 2


def test_orch_fanout_retry_through_the_real_entry_point(orch, scripted_server, tmp_path):
    orch.provider()
    wave = failed_wave(scripted_server, tmp_path, "--max-steps", "2", "--timeout", "30")
    before = scripted_server.count("a")
    scripted_server.script("a", looping)
    done = subprocess.run([sys.executable, "-m", "orchestrator", "fanout", "--retry-failed",
                           wave, "--json"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ORCH_DAEMON": "off"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["leg_limits"] == {"timeout_s": 1800.0, "max_steps": 2}
    assert scripted_server.count("a") - before == 2


def test_the_timeout_is_kept_by_every_face_through_the_one_core_function(orch,
                                                                        scripted_server,
                                                                        tmp_path):
    """`orch fanout`, `orch mcp`'s continue_wave and `orch ui`'s follow-up build their request
    apart, but prepare it in one place: each keeps the wave's limits; a flag given wins."""
    from orchestrator.app import requests
    from orchestrator.app.continuation import follow_up
    from orchestrator.app.prepare import prepare
    from orchestrator.mcp_server.tools import fanout_request

    orch.provider()
    answered = answered_wave(scripted_server, tmp_path, "--timeout", "30", "--max-steps", "7")
    failed = failed_wave(scripted_server, tmp_path, "--timeout", "45", "--max-steps", "9")
    runs = str(orch.home / "runs")
    asked = {
        "cli": requests.fanout(continue_wave=answered, prompt="more?", runs_dir=runs),
        "mcp": fanout_request({"prompt": "more?", "continue_wave": answered}),
        "ui": follow_up(answered, "more?", runs_dir=runs),
        "retry": requests.fanout(retry_failed=failed, runs_dir=runs),
    }
    for face, request in asked.items():
        with prepare(request) as prepared:
            want = (2700.0, 9) if face == "retry" else (1800.0, 7)
            assert (prepared.plan.timeout_s, prepared.plan.max_steps) == want, face
    given = fanout_request({"prompt": "more?", "continue_wave": answered, "timeout_minutes": 2})
    with prepare(given) as prepared:
        assert (prepared.plan.timeout_s, prepared.plan.max_steps) == (120.0, 7)


def test_a_wave_recorded_before_the_limits_were_runs_on_the_defaults(orch, scripted_server,
                                                                     tmp_path):
    orch.provider()
    wave = failed_wave(scripted_server, tmp_path, "--max-steps", "2")
    path = wave_json(orch.home / "runs", wave)
    doc = json.loads(path.read_text())
    del doc["leg_limits"]
    path.write_text(json.dumps(doc))
    before = scripted_server.count("a")
    scripted_server.script("a", looping)
    retried = fanout("--retry-failed", wave)
    assert scripted_server.count("a") - before == 20  # the default --max-steps
    assert retried["leg_limits"] == {"timeout_s": 600.0, "max_steps": 20}


TAMPERED = [("max_steps", -1), ("max_steps", "40"), ("max_steps", 10**9), ("max_steps", True),
            ("max_steps", 2.5), ("timeout_s", -5), ("timeout_s", float("nan")),
            ("timeout_s", "x"), ("timeout_s", 1e308), ("timeout_s", None),
            ("timeout_s", float("inf")), ("timeout_s", 0), ("max_steps", 0)]


def test_a_tampered_limit_is_refused_in_one_line_with_nothing_sent(orch, scripted_server,
                                                                    tmp_path):
    orch.provider()
    failed = failed_wave(scripted_server, tmp_path, "--max-steps", "2")
    answered = answered_wave(scripted_server, tmp_path, "--max-steps", "2")
    scripted_server.script("a", looping)
    sent = scripted_server.count("a")
    for key, value in TAMPERED:
        for wave, args in ((failed, ["--retry-failed", failed]),
                           (answered, ["--continue", answered, "more?"])):
            path = wave_json(orch.home / "runs", wave)
            doc = json.loads(path.read_text())
            doc["leg_limits"] = {"timeout_s": 600.0, "max_steps": 2, key: value}  # one bad
            path.write_text(json.dumps(doc))  # NaN goes as NaN: Python's json writes it
            done = invoke(["fanout", "--json", *args])
            assert done.exit_code == 1, (key, value, done.output)
            said = done.stderr.strip()
            assert "\n" not in said and "Traceback" not in said, said
            assert f"records leg_limits.{key} = " in said and "restore it" in said, said
            assert scripted_server.count("a") == sent, (key, value)  # nothing sent
    path = wave_json(orch.home / "runs", failed)  # the whole field not as orch writes it
    doc = json.loads(path.read_text())
    doc["leg_limits"] = "forever"
    path.write_text(json.dumps(doc))
    done = invoke(["fanout", "--retry-failed", failed, "--json"])
    assert done.exit_code == 1 and "records leg_limits = a str, not as" in done.stderr
    assert "forever" not in done.stderr  # the record's text is never echoed
    assert scripted_server.count("a") == sent
    # a limit given now is not read from the record: the flag wins, the run goes ahead
    retried = fanout("--retry-failed", failed, "--max-steps", "3", "--timeout", "5")
    assert scripted_server.count("a") - sent == 3
    assert retried["leg_limits"] == {"timeout_s": 300.0, "max_steps": 3}


def _calls(tree: ast.AST, name: str) -> list[tuple[str, ast.Call]]:
    """(enclosing function, call) for each call of ``name`` in ``tree``."""
    out = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == name:
                    out.append((fn.name, node))
    return out


def test_every_wave_prepared_from_a_recorded_wave_keeps_its_limits_through_the_one_reader():
    """The call sites of ``prepare_wave``, enumerated: only a fresh fanout takes the limits
    from its request as they are; every other (a retry, a follow-up) gets them from
    ``leg_limits.kept``; and nothing else reads the record's field."""
    sites, readers = {}, set()
    for path in sorted((ROOT / "orchestrator").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if '"leg_limits"' in text:
            readers.add(path.relative_to(ROOT).as_posix())
        for fn, call in _calls(ast.parse(text), "prepare_wave"):
            given = {k.arg: ast.unparse(k.value) for k in call.keywords
                     if k.arg in ("timeout_min", "max_steps")}
            sites[fn] = (path.relative_to(ROOT).as_posix(), given)
    assert readers == {"orchestrator/engine/leg_limits.py"}
    assert set(sites) == {"prepare_fanout", "prepare_retry", "prepare_continue"}, sites
    assert sites["prepare_fanout"][1] == {"timeout_min": "request.timeout_min",
                                          "max_steps": "request.max_steps"}
    assert sites["prepare_retry"][1] == {"timeout_min": "inputs.timeout_min",
                                         "max_steps": "inputs.max_steps"}
    assert sites["prepare_continue"][1] == {"timeout_min": "timeout_min",
                                            "max_steps": "max_steps"}
    for module in ("orchestrator/app/retry.py", "orchestrator/app/continuation.py"):
        assert "leg_limits.kept(" in (ROOT / module).read_text(encoding="utf-8"), module
