"""The format-aware estimator against litellm's own counter (the reference the guards trust)."""

from __future__ import annotations

import csv
import io
import json
import random

import pytest

from orchestrator.models import estimate
from orchestrator.runtime import litellm

PROSE = ("Every request reserves output tokens before the model runs, and some gateways refuse "
         "a request whose reservation exceeds the remaining credit, even when the answer would "
         "have been short. The guard keeps that reservation honest. ") * 12
CODE = '''
def fit(window: int, estimate: int, margin: int = 4096) -> int | None:
    """Room left for the answer, or None."""
    room = window - estimate - margin
    if room <= 1:
        return None
    for step in range(3):
        room = max(room // 2, 1024)
    return room
''' * 8


def _json() -> str:
    rnd = random.Random(3)
    return json.dumps([{"id": i, "model": f"provider/model-{rnd.randint(1, 99)}",
                        "cost_usd": round(rnd.random(), 6), "ok": rnd.random() > 0.5,
                        "tags": ["a", "b"]} for i in range(60)], indent=2)


def _csv() -> str:
    rnd = random.Random(5)
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["ts", "user", "latency_ms", "bytes", "ok"])
    for i in range(200):
        writer.writerow([f"2025-03-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
                         rnd.randint(10000, 99999), round(rnd.random() * 500, 2),
                         rnd.randint(100, 99999), rnd.choice(["true", "false"])])
    return buf.getvalue()


SAMPLES = {"prose": PROSE, "code": CODE, "json": _json(), "csv": _csv()}


@pytest.mark.parametrize("kind", list(SAMPLES))
def test_kind_is_recognised(kind):
    assert estimate.kind_of(SAMPLES[kind]) == kind


@pytest.mark.parametrize("kind", list(SAMPLES))
def test_format_aware_count_is_within_20_percent_of_litellms(kind):
    text = SAMPLES[kind]
    reference = litellm().token_counter(text=text)
    assert abs(estimate.heuristic_tokens(text) - reference) / reference < 0.20


def test_flat_characters_over_four_is_far_off_on_csv_and_this_is_not():
    text = SAMPLES["csv"]
    reference = litellm().token_counter(text=text)
    assert estimate.flat_tokens(text) < 0.6 * reference  # the rule of thumb: 40 %+ low
    assert estimate.estimate_text(text) == reference  # litellm's counter, where it works


def test_messages_count_content_tool_calls_tools_and_overhead():
    messages = [{"role": "user", "content": "hello there"},
                {"role": "assistant", "content": None,
                 "tool_calls": [{"id": "c1", "type": "function",
                                 "function": {"name": "read", "arguments": "{\"path\": \"a\"}"}}]}]
    tools = [{"type": "function", "function": {"name": "read", "parameters": {}}}]
    count = litellm().token_counter
    expected = (estimate.REPLY_PRIMING + 2 * estimate.MESSAGE_OVERHEAD
                + count(text="hello there")
                + count(text=json.dumps(messages[1]["tool_calls"]))
                + count(text=json.dumps(tools)))
    assert estimate.estimate_messages(messages, tools) == expected
    assert estimate.estimate_messages([]) == 0


def test_without_the_counter_the_heuristic_answers():
    assert estimate.estimate_text(PROSE, exact=False) == estimate.heuristic_tokens(PROSE)
    assert estimate.estimate_text("") == 0


def test_tokenizers_that_would_download_are_never_asked_for():
    assert estimate._tokenizer_name("openai/llama-3-8b-instruct") is None
    assert estimate._tokenizer_name("openai/gpt-4o") == "openai/gpt-4o"
