"""Prompts that agree, for every tier: the full prompt of every stage (seat, repair, judge,
chair, verdict repair) as it went on the wire — system prompt and user message — carries its
output-format instruction exactly once, and nothing in it contradicts that instruction."""

from __future__ import annotations

import re

import pytest
from test_council_run import chair, kind_of, run_council, script_bench, seat

from orchestrator.testing.scripted_server import Reply

FORMAT = {  # stage -> the one output-format instruction it must carry
    "review": "end your answer with exactly one fenced JSON block",
    "repair": "Reply with only the findings of that review as one fenced JSON block",
    "judge": "End your answer with exactly one fenced JSON block",
    "chair": "The last line of your answer, on its own, is the verdict",
    "verdict-repair": "Reply with exactly one line and nothing else",
}
# Instructions that would pull a model away from a stage's format.
CONTRADICTIONS = [r"plain text", r"final answer as",
                  r"(?:use|write|include) no (?:code )?(?:blocks?|fences?)",
                  r"do not (?:use|write|include) (?:a )?(?:code )?(?:blocks?|fences?)",
                  r"do not (?:use|write) (?:json|markdown|code)", r"without (?:any )?formatting",
                  r"answer in prose only", r"end (?:your|the) answer with"]


def full_prompt(body: dict) -> str:
    return "\n\n".join(str(m.get("content") or "") for m in body["messages"]
                       if m["role"] in ("system", "user"))


@pytest.mark.parametrize("tier", ["minimal", "default"])
def test_every_stage_prompt_states_its_format_once_and_nothing_contradicts_it(
        orch, scripted_server, tier):
    orch.provider()
    models = ["scripted/alpha", "scripted/bravo", "scripted/charlie", "scripted/delta"]
    orch.config(plugin_config={"tiers": {"models": {m: tier for m in models}}})
    # reviews without a block (→ repair), a chair without a verdict (→ verdict repair)
    script_bench(scripted_server,
                 **{n: seat(n, review=Reply(text=f"{n} wrote prose and no block."))
                    for n in ("alpha", "bravo", "charlie")},
                 delta=chair(answer="A synthesis with no verdict line.",
                             verdict_fix="VERDICT: ship"))
    result, doc = run_council()
    assert doc is not None, result.output
    seen = set()
    for r in scripted_server.chats:
        stage = kind_of(r.body)
        seen.add(stage)
        prompt = full_prompt(r.body)
        system = r.body["messages"][0]
        if tier == "minimal":  # the compact prompt really was there
            assert system["role"] == "system" and "careful assistant" in system["content"]
        else:
            assert system["role"] != "system" or "careful assistant" not in system["content"]
        instruction = FORMAT[stage]
        assert prompt.count(instruction) == 1, (tier, stage)
        for other, text in FORMAT.items():
            if other != stage and text.lower() != instruction.lower():
                assert text not in prompt, (tier, stage, other)
        instructions = prompt.replace(instruction, "")
        for pattern in CONTRADICTIONS:
            found = re.search(pattern, instructions, re.I)
            assert found is None, (tier, stage, found and found.group())
    assert seen == set(FORMAT)
