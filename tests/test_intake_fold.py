"""The anonymity rules find a participant's name however a writer spells it (hypothesis draws
the spellings), leave ordinary text alone, and the intake's memory does not rescan a long
conversation at every step."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.intake import Anonymity, Policy, admit, admit_text
from orchestrator.intake.anonymity import REDACTED
from orchestrator.intake.fold import confusables, fold
from orchestrator.request import Request

FAMILIES = ("Claude", "Anthropic", "OpenAI", "GPT", "Qwen", "Qianwen", "Gemini", "Llama",
            "DeepSeek", "Mistral")
ANON = Anonymity(FAMILIES + ("o4", "gpt-4o", "qwen2.5-72b"))
# every non-ASCII look-alike of each ASCII letter, from the confusables table
LOOKALIKES: dict[str, list[str]] = {}
for _char, _ascii in confusables().items():
    LOOKALIKES.setdefault(_ascii.lower(), []).append(_char)
ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"]
SEPARATORS = [" ", ".", "-", "_", "·", "*"]


@st.composite
def spelling(draw, name: str | None = None) -> str:
    """A family name as a writer might disguise it: case, look-alikes, fullwidth, invisible
    characters, separators between letters, a version attached."""
    name = name or draw(st.sampled_from(FAMILIES))
    out = []
    for i, c in enumerate(name):
        c = c.upper() if draw(st.booleans()) else c.lower()
        form = draw(st.sampled_from(["plain", "lookalike", "fullwidth"]))
        if form == "lookalike" and LOOKALIKES.get(c.lower()):
            c = draw(st.sampled_from(LOOKALIKES[c.lower()]))
        elif form == "fullwidth" and c.isascii() and c.isalpha():
            c = chr(ord(c) + 0xFEE0)
        out.append(c)
        if i < len(name) - 1:
            gap = draw(st.sampled_from(["", "", "zw", "sep"]))
            if gap == "zw":
                out.append(draw(st.sampled_from(ZERO_WIDTH)))
            elif gap == "sep" and len(name) > 3:
                out.append(draw(st.sampled_from(SEPARATORS)))
    out.append(draw(st.sampled_from(["", "2.5", "4o", "-3.1", " 3", "s", "-72b"])))
    return "".join(out)


def _reader(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


@settings(max_examples=60, deadline=None)
@given(spelling(), st.sampled_from(["As {} I think", "({})", "{}: yes", "I am {}."]))
def test_every_disguise_of_a_name_is_redacted(name, frame):
    text = frame.format(name)
    out, n = ANON.redact(text)
    assert n >= 1 and REDACTED in out, (text, out)
    assert ANON.leaks(out) == []
    assert frame.split("{}")[0] in out  # the text around it is kept as written


ORDINARY = ["the cache", "a claudication", "gemstone", "openair market", "qwerty keys",
            "alpacas graze", "e.g. pt", "2024-01-15", "metadata", "Ｈｅｌｌｏ", "Привет, мир",
            "gptq quantised", "deep seeking", "a mild wind"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(ORDINARY), min_size=1, max_size=6))
def test_ordinary_text_passes_unchanged(words):
    text = " and ".join(words)
    assert ANON.redact(text) == (text, 0)


def test_the_issues_spellings():
    for text in ("Qwen2.5", "GPT4o", "o4-mini", "Open AI", "Qianwen", "G.P.T.",
                 "\u0421laude", "\uff21\uff4e\uff54\uff48\uff52\uff4f\uff50\uff49\uff43",
                 "Open\u200bAI", "\u041epen\u0410I", "ChatOpenAI()", "CIaude"):
        assert ANON.leaks(text), text
        assert ANON.leaks(ANON.redact(text)[0]) == []


def test_fold_keeps_the_origin_of_each_character():
    text = "a\u200bСlа"  # zero-width, Cyrillic С and а
    folded = fold(text)
    assert folded.text == "aCla"
    assert folded.span(1, 4, text) == (2, 5)


def test_exempt_text_is_left_as_the_user_wrote_it():
    briefing = "Compare our OpenAI client with the Claude one."
    anon = Anonymity(FAMILIES, exempt=(briefing,))
    text = f"{briefing}\n\nReview A says GPT4o is slow."
    out, n = anon.redact(text)
    assert out.startswith(briefing) and n == 1 and "GPT4o" not in out


def test_admit_text_withholds_masks_and_redacts():
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
    got = admit_text(f"key:\n{pem}\nAs Сlaude I say hi", ANON)
    assert "MIIEvQ" not in got.text and "private-key" in got.withheld
    assert got.redacted == 1 and got.leaks == ()


def test_a_long_conversation_is_not_rescanned_at_every_step(monkeypatch):
    from importlib import import_module

    admit_mod = import_module("orchestrator.intake.admit")
    calls = []
    real = admit_mod.admit_text
    monkeypatch.setattr(admit_mod, "admit_text",
                        lambda text, anonymity=None: calls.append(text) or real(text, anonymity))
    policy = Policy(anonymity=ANON)
    messages = [{"role": "user", "content": "briefing " * 1000}]
    for step in range(1, 6):
        messages = [*messages, {"role": "assistant", "content": f"step {step}"},
                    {"role": "tool", "tool_call_id": str(step), "content": f"result {step}"}]
        admit(Request(model="p/m", messages=messages), policy)
    # the briefing once; each new turn once
    assert calls.count("briefing " * 1000) == 1
    assert len(calls) == 1 + 2 * 5
