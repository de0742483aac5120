"""Ensemble contestants (issue 29 item 3), end to end: three scripted single models and a
fanout of the three with a chair, 12 tasks × 3 trials on the scripted server; the report's
"fanout(a,b,c)+chair vs best member" line matches a recomputation from the saved trials."""

from __future__ import annotations

import json
import re
import textwrap

import numpy as np
import pytest
from scipy import stats as sps

from orchestrator.bakeoff import stats
from orchestrator.testing.daemon import invoke
from orchestrator.testing.sandbox import unsafe_unless_confined
from orchestrator.testing.scripted_server import Reply

TASKS = [f"t{i}" for i in range(12)]
RIGHT_ON = {"a": TASKS[:5], "b": TASKS[:7], "c": TASKS[:3] + ["t9"], "chair": TASKS[:10]}


def answers(model):
    def reply(body, n):
        text = "\n".join(str(m.get("content")) for m in body["messages"])
        task = re.search(r"Task (t\d+)", text).group(1)
        said = f"The code is CODE-{task}." if task in RIGHT_ON[model] else "I do not know."
        return Reply(text=said, usage={"prompt_tokens": 100, "completion_tokens": 10})
    return reply


def write_bench(tmp_path):
    cases = tmp_path / "cases"
    cases.mkdir()
    for task in TASKS:
        (cases / f"{task}.json").write_text(json.dumps(
            {"id": task, "task": f"Task {task}: reply with the code CODE-{task}.",
             "expect": {"contains": [f"CODE-{task}"]}, "solution": f"CODE-{task}"}))
    config = tmp_path / "bench.toml"
    config.write_text(textwrap.dedent("""\
        [bench]
        cases = "cases"
        trials = 3
        jobs = 8
        """) + "".join(f'[[contestants]]\nname = "{m}"\nmodel = "scripted/{m}"\n'
                       'tools = "none"\n' for m in "abc") + textwrap.dedent("""\
        [[contestants]]
        name = "ens"
        kind = "fanout"
        models = ["scripted/a", "scripted/b", "scripted/c"]
        chair = "scripted/chair"
        tools = "none"
        """))
    return config


@pytest.mark.slow
def test_fanout_with_chair_against_its_best_member(orch, scripted_server, tmp_path):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    for model in RIGHT_ON:
        scripted_server.script(model, answers(model))
    config = write_bench(tmp_path)
    out = tmp_path / "r.json"
    result = invoke(["bench", *unsafe_unless_confined(), "--config", str(config), "--yes",
                     "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output[-3000:]
    doc = json.loads(out.read_text())
    # each ensemble trial was one wave: three members and the chair, on the shared server
    assert scripted_server.count("chair") == 36
    assert scripted_server.count("a") == 36 + 36  # its own trials and as a member
    ens = [r for r in doc["trials"] if r["contestant"] == "ens"]
    assert len(ens) == 36 and all(r["cost_usd"] is not None for r in ens)

    # the recomputation, from the saved trials alone
    def rate(name, task):
        rows = [r for r in doc["trials"] if r["contestant"] == name and r["task"] == task
                and not r["excluded"]]
        return sum(r["passed"] for r in rows) / len(rows)

    rates = {n: np.array([rate(n, t) for t in TASKS]) for n in ("a", "b", "c", "ens")}
    best = max("abc", key=lambda n: rates[n].mean())
    diff = rates["ens"] - rates[best]
    wins, losses = int((diff > 0).sum()), int((diff < 0).sum())
    p = sps.binomtest(wins, wins + losses).pvalue
    cost = {n: np.mean([r["cost_usd"] for r in doc["trials"] if r["contestant"] == n])
            for n in ("ens", best)}
    ratio = cost["ens"] / cost[best]
    assert best == "b" and (wins, losses) == (3, 0) and ratio == pytest.approx(4.0)
    level = 1 - 2 * stats.expanded_tail(12)
    ref = sps.bootstrap((diff,), np.mean, n_resamples=10_000, method="percentile",
                        confidence_level=level,
                        random_state=np.random.default_rng(0)).confidence_interval

    report = (out.with_suffix("") / "report.md").read_text()
    line = next(x for x in report.splitlines() if "vs best member" in x)
    m = re.search(r"fanout\(scripted/a,scripted/b,scripted/c\)\+chair vs best member \(b\): "
                  r"Δ ([+-]\d+) \[([+-]\d+), ([+-]\d+)\] points on (\d+) tasks, W/L/T "
                  r"(\d+)/(\d+)/(\d+), p ([\d.e-]+) \(Holm ([\d.e-]+)\), cost ratio "
                  r"×([\d.]+): (.*)$", line)
    assert m, line
    assert int(m[1]) == round(100 * diff.mean())
    assert abs(int(m[2]) - 100 * ref.low) <= 10 and abs(int(m[3]) - 100 * ref.high) <= 10
    assert int(m[4]) == 12
    assert (int(m[5]), int(m[6]), int(m[7])) == (wins, losses, 12 - wins - losses)
    assert float(m[8]) == pytest.approx(p, rel=1e-2)
    assert float(m[9]) == pytest.approx(p, rel=1e-2)  # one ensemble: Holm changes nothing
    assert float(m[10]) == pytest.approx(ratio, abs=0.01)
    # W/L/T 3/0/9 at p 0.25: no verdict yet, and how many tasks would give one
    assert m[11] == ("inconclusive at this size (needs about "
                     f"{stats.tasks_needed(wins, losses, 12 - wins - losses)} tasks)")
    assert line.removeprefix("- ") in result.stdout  # the terminal says it too


def test_a_fanout_needs_two_models_and_known_keys(orch, tmp_path):
    orch.provider()
    config = tmp_path / "bench.toml"
    config.write_text('[bench]\nbuiltin = "format"\n[[contestants]]\nname = "e"\n'
                      'kind = "fanout"\nmodels = ["scripted/a"]\n')
    result = invoke(["bench", "--config", str(config), "--yes"])
    assert result.exit_code == 1 and "lists two or more models" in result.output
    config.write_text('[bench]\nbuiltin = "format"\n[[contestants]]\nname = "e"\n'
                      'kind = "fanout"\nmodels = ["scripted/a", "scripted/b"]\nchiar = "x"\n')
    result = invoke(["bench", "--config", str(config), "--yes"])
    assert result.exit_code == 1 and "unknown key(s) chiar" in result.output


def test_the_estimate_counts_every_request_of_an_ensemble(orch, scripted_server, tmp_path):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=2.0)
    config = tmp_path / "bench.toml"
    config.write_text('[bench]\nbuiltin = "format"\n'
                      '[[contestants]]\nname = "a"\nmodel = "scripted/a"\n'
                      '[[contestants]]\nname = "fan"\nkind = "fanout"\n'
                      'models = ["scripted/a", "scripted/b"]\nchair = "scripted/c"\n'
                      '[[contestants]]\nname = "panel"\nkind = "council"\n'
                      'models = ["scripted/a", "scripted/b"]\nchair = "scripted/c"\n')
    result = invoke(["bench", "--config", str(config), "--dry-run"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "fan: fanout(scripted/a,scripted/b)+chair scripted/c" in out
    assert "panel: council(scripted/a,scripted/b)+chair scripted/c" in out
    cost = {m[1]: float(m[2])
            for m in re.finditer(r"^  (\w+): ~.* tokens, \$([\d.]+)", out, re.M)}
    assert cost["fan"] == pytest.approx(3 * cost["a"], rel=0.01)  # two members and a chair
    assert cost["panel"] == pytest.approx(5 * cost["a"], rel=0.01)  # seats review and judge
    assert scripted_server.count() == 0
