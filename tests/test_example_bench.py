"""examples/ensemble-bench end to end: the shipped bench file and tasks, its models replaced
by scripted ones (as its README replaces them by a provider's), through the real `orch bench`
entry point on the scripted server: a plain vote, a chair's synthesis and a deliberation at
(about) equal spend, and the report says which beats the vote.

The scripted models: ``good`` answers every problem right; ``bad1`` and ``bad2`` give the
same wrong number on eight of the twelve, but adopt a peer's answer that is right when they
read one. So the vote (3 good of 9) and the chair (it sides with the majority of its 8) fail
those eight; the deliberation (1 good of 3) reads the right answer in round 2, every leg
adopts it, and it stops there."""

from __future__ import annotations

import json
import re
import tomllib
from collections import Counter
from pathlib import Path

from orchestrator.testing.daemon import invoke
from orchestrator.testing.scripted_server import Reply

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ensemble-bench"
EASY = {"pizza", "apples", "clock", "numbers"}
# seven problems the bad members get wrong and one they get right: enough for a verdict
# (seven wins of seven, Holm-adjusted over two comparisons: p 0.031) at two thirds the time
ONLY = ["bakery", "train", "stationery", "tulips", "cyclist", "library", "ages", "pizza"]
USAGE = {"prompt_tokens": 100, "completion_tokens": 5}
MEMBERS = {"vote": ["good"] * 3 + ["bad1"] * 3 + ["bad2"] * 3,
           "chair": ["good"] * 2 + ["bad1"] * 3 + ["bad2"] * 3,
           "deliberate": ["good", "bad1", "bad2"]}


def tasks() -> list[dict]:
    return [tomllib.loads(p.read_text()) for p in sorted((EXAMPLE / "tasks").glob("*.toml"))]


def truth(body) -> tuple[str, str]:
    """(task id, its solution) of the problem this request's conversation is about."""
    first = str(body["messages"][0]["content"])
    for t in tasks():
        if t["task"] in first:
            return t["id"], t["solution"]
    raise AssertionError(f"no task in {first[:200]!r}")


def member(model: str):
    def reply(body, n):
        task, right = truth(body)
        prompt = str(body["messages"][-1]["content"])
        if "<<<Answer" not in prompt:  # round 1, or a plain fanout's only round
            wrong = model != "good" and task not in EASY
            return Reply(text=str(int(right) + 1) if wrong else right, usage=USAGE)
        shown = {m.group(1): m.group(2) for m in re.finditer(
            r"<<<(Answer [A-Z]) \[\w+\]\n(.*?)\n\1 \[\w+\]>>>", prompt, re.S)}
        label = next((lb for lb, text in shown.items() if text.strip() == right),
                     sorted(shown)[0])
        decision = "adopt" if model != "good" and shown.get(label, "").strip() == right \
            else "keep"
        return Reply(text="```json\n" + json.dumps({"decision": decision, "adopt": label,
                                                    "vote": label, "reason": "checked"})
                     + "\n```", usage=USAGE)
    return reply


def chair(body, n):
    """A chair that sides with the majority of the answers it reads."""
    prompt = str(body["messages"][-1]["content"])
    answers = re.findall(r"<<<seat-text \w+\n(.*?)\nseat-text \w+>>>", prompt, re.S)
    most = Counter(a.strip() for a in answers).most_common(1)[0][0]
    return Reply(text=f"Most answers say {most}.\n{most}", usage=USAGE)


def scripted_config(tmp_path: Path) -> Path:
    """The shipped bench.toml with scripted models, its tasks where they are."""
    text = (EXAMPLE / "bench.toml").read_text()
    text = text.replace('cases = "tasks"', f'cases = "{EXAMPLE / "tasks"}"')
    blocks = text.split("[[contestants]]")
    for i, block in enumerate(blocks[1:], start=1):
        name = re.search(r'name = "(\w+)"', block).group(1)
        models = ", ".join(f'"scripted/{m}"' for m in MEMBERS[name])
        block = re.sub(r"models = \[.*?\]", f"models = [{models}]", block, flags=re.S)
        blocks[i] = re.sub(r'chair = "[^"]+"', 'chair = "scripted/chair"', block)
    config = tmp_path / "bench.toml"
    config.write_text("[[contestants]]".join(blocks))
    return config


def test_the_example_bench_says_which_ensemble_beats_the_vote(orch, scripted_server, tmp_path):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    for name in ("good", "bad1", "bad2"):
        scripted_server.script(name, member(name))
    scripted_server.script("chair", chair)
    out = tmp_path / "results.json"
    result = invoke(["bench", "--config", str(scripted_config(tmp_path)), "--yes", "-q",
                     "--out", str(out), "--only", ",".join(ONLY), "--jobs", "8"])
    assert result.exit_code == 0, result.output[-3000:]
    doc = json.loads(out.read_text())
    by = {}
    for r in doc["trials"]:
        by.setdefault(r["contestant"], []).append(r)
    assert {k: len(v) for k, v in by.items()} == {"vote": 8, "chair": 8, "deliberate": 8}
    # the vote: the majority of nine answers, said per trial
    assert sum(r["passed"] for r in by["vote"]) == 1
    assert all(r["vote"]["outcome"] == "majority" for r in by["vote"])
    assert sum(r["passed"] for r in by["chair"]) == 1
    assert all(r["passed"] for r in by["deliberate"]), by["deliberate"][0]
    for r in by["deliberate"]:
        d = r["deliberation"]
        hard = r["task"] not in EASY
        # the easy problems: one answer after round 1, so no second round
        assert (d["stop"], d["rounds"]) == ("consensus", 2 if hard else 1), d
    # about equal spend: nine requests a trial, the deliberation at most nine
    cost = {c: sum(r["cost_usd"] for r in v) / len(v) for c, v in by.items()}
    assert cost["deliberate"] < cost["vote"] <= cost["chair"]
    # the verdict, against the vote (the baseline), with its interval
    rows = {c["contestant"]: c for c in doc["stats"]["comparisons"]}
    assert doc["stats"]["baseline"] == "vote"
    assert (rows["deliberate"]["wins"], rows["deliberate"]["losses"]) == (7, 0)
    assert rows["deliberate"]["verdict"] == "better" and rows["deliberate"]["delta_ci"][0] > 0
    assert rows["chair"]["verdict"] == "inconclusive"
    line = next(x for x in result.stdout.splitlines() if x.lstrip().startswith("deliberate")
                and "better" in x)
    assert "+88" in line and "7/0/1" in line, line
    assert re.search(r"chair\s.*0/0/8.*inconclusive", result.stdout), result.stdout
