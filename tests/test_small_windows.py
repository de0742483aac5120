"""Small windows: the answer's reserve is proportional to the window, so a 4,096-token model
answers "hi" and the embedded model's 2,048-token slot reads a file, with the context guard and
the workspace read guard both on (a fixed 4,096-token margin refused both)."""

from __future__ import annotations

import json

import pytest

from orchestrator.models.reserve import answer_reserve
from orchestrator.testing.scripted_server import Reply


def read_call(path: str) -> dict:
    return {"id": "r1", "name": "read", "arguments": {"path": path}}


@pytest.mark.parametrize(("window", "reserve"), [
    (2048, 1024), (4096, 2048), (12000, 2048), (20000, 3000), (128000, 19200), (1_000_000, 20000)])
def test_the_reserve_is_proportional_and_never_more_than_half_the_window(window, reserve):
    assert answer_reserve(window) == reserve


@pytest.mark.parametrize("window", [4096, 2048])
def test_a_small_window_answers_hi_and_reads_a_file_with_both_guards_on(
        orch, scripted_server, tmp_path, window):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("".join(f"line {i}: a short note\n" for i in range(20)))
    orch.provider(context_window=window)
    scripted_server.window("m", window)
    scripted_server.script("m", Reply(tool_calls=[read_call("notes.txt")]), Reply(text="hello"))
    run = orch.run_leg("m", "hi", workspace=ws, options={"output_budget": 256})
    assert run.leg["status"] == "complete", run.leg.get("reason")
    assert run.leg["answer"] == "hello"
    assert [r.status for r in run.requests if r.path.endswith("/chat/completions")] == [200, 200]
    read = [m for m in run.bodies[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert "line 19: a short note" in read and "read refused" not in read
    assert not [n for n in run.leg["notes"] if "starvation" in n or "overrun" in n]


def test_a_prompt_past_the_reserve_on_a_small_window_is_still_refused(orch, scripted_server):
    orch.provider(context_window=2048)
    scripted_server.window("m", 2048)
    run = orch.run_leg("m", "word " * 1500, options={"tools": "none"})
    assert run.leg["status"] == "refused" and scripted_server.count() == 0
    assert run.leg["reason"].startswith("OUTPUT_STARVATION: refused (scripted/m)")
    assert json.dumps(run.leg["output_starvation"]["window"]) == "2048"
