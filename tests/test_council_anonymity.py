"""Anonymity by identifier, measured on a corpus of review text: every identifier of a seat
is redacted, and at most 1% of the ordinary words are.

In the corpus, ``{{...}}`` marks an identifier (a seat naming itself or another seat, or a
name of a seated family: "sonnet" with a Claude seat, "llama" with a Llama seat, even as
English words); every other word is ordinary — including words models and providers are named
after ("local", "work", "mini", "flash", "turbo", "large", "instruct")."""

from __future__ import annotations

import re

import pytest

from orchestrator.council.anonymity import identifying_terms, is_ordinary, name_tokens
from orchestrator.council.bundle import REDACTED, leaks, redact
from orchestrator.models.addressing import ResolvedModel

SEATS = [
    ("openai/gpt-4o-mini", "openai", False),
    ("anthropic/claude-3-5-sonnet-20241022", "anthropic", False),
    ("local/gemma-3-270m", "local", True),
    ("myvllm/qwen3-8b@hot", "myvllm", True),
    ("gemini/gemini-1.5-flash", "gemini", False),
    ("work/llama-3.1-8b-instruct", "work", True),
    ("deepseek/deepseek-coder", "deepseek", False),
    ("mistral/mistral-large-latest", "mistral", False),
]

CORPUS = """\
As {{GPT-4o-mini}}, I read src/cache/client.py first. The local cache in the client is
rebuilt on every request, which does a lot of work for nothing; the work queue then waits on
a lock that the open socket holds. A mini benchmark would show it: the flash of load at start
comes from the cold cache. I would keep the local variable but move the cache to the module.

{{Claude}} here: the turbo path in the large handler skips validation. The instruct field is
read from the request without a check, and a {{sonnet}} of nested ifs follows (a joke: it is long).
The latest release notes say the coder tool writes files; it should not, in a read-only review.

This review, from {{qwen3-8b}} ({{myvllm/qwen3-8b@hot}}), agrees with most of the above. The
local model of the data (a list of dicts) is fine; the work it does per frame is the problem.
{{Qwen}} models are often told to keep answers short, so: the race is real.

{{Gemini 1.5 Flash}} speaking. Flash storage is not the bottleneck; the network is. The client
opens a new connection for every call instead of pooling, and the timeout is missing.

I am {{DeepSeek-Coder}} ({{deepseek}}), and I disagree with the review that calls the timeout a
blocker: the caller already has one. The mini helper is fine. Work on the pool first.

Written by {{Mistral-Large-Latest}}: the large file mixes three concerns; split it, and
give each part its own tests before anything else moves. The latest
change also removed a test. Instruct new contributors to run the suite locally.

{{llama-3.1-8b-instruct}} review: the {{llama}} of a function (it carries everything) is
handle_request; break it up. Open questions: who owns the cache? Is the local lock needed?

I ({{gemma-3-270m}}, on {{local/gemma-3-270m}}) found nothing more. A model from
{{OpenAI}} or {{Anthropic}} would say the same. Plain words: open, local, work, mini, flash,
turbo, large, latest, instruct, coder, {{sonnet}}, {{llama}}, {{gemma}}, {{mistral}}, claim,
review, model.
"""


def model(name: str, provider: str, declared: bool) -> ResolvedModel:
    base = name.split("@", 1)[0]
    lite = base if not declared else "openai/" + base.split("/", 1)[1]
    return ResolvedModel(name=name, provider=provider, litellm_model=lite, declared=declared)


MODELS = [model(*s) for s in SEATS]
TERMS = identifying_terms(MODELS)
_WORDS = re.compile(r"[A-Za-z0-9][A-Za-z0-9'._/-]*[A-Za-z0-9]|[A-Za-z0-9]")


def segments() -> list[tuple[str, bool]]:
    """(text, is_identifier) in corpus order."""
    parts = re.split(r"\{\{(.*?)\}\}", CORPUS)
    return [(p, i % 2 == 1) for i, p in enumerate(parts) if p]


def test_no_identifier_survives():
    plain = "".join(text for text, _ in segments())
    clean = redact(plain, TERMS)
    assert leaks(clean, TERMS) == []
    for text, ident in segments():
        if ident:
            assert redact(text, TERMS) == REDACTED, text
            assert text.lower() not in clean.lower(), text


def test_at_most_one_percent_of_ordinary_words_are_redacted():
    words = redacted = 0
    hit = []
    for text, ident in segments():
        if ident:
            continue
        n = len(_WORDS.findall(text))
        gone = redact(text, TERMS).count(REDACTED)
        words += n
        redacted += gone
        if gone:
            hit.append(re.findall(r"\w+", text)[:3])
    assert words >= 300
    assert redacted / words <= 0.01, (redacted, words, hit)


@pytest.mark.parametrize("word", ["local", "work", "mini", "flash", "turbo", "large", "latest",
                                  "instruct", "coder", "open", "review", "model"])
def test_ordinary_words_are_not_terms(word):
    assert word not in TERMS


@pytest.mark.parametrize("term", ["qwen", "qwen3", "claude", "openai", "deepseek", "gemini",
                                  "anthropic", "gpt-4o-mini", "myvllm", "gemma-3-270m"])
def test_distinctive_names_are_terms(term):
    assert term in TERMS


def test_the_word_list_is_real():
    assert is_ordinary("cache") and is_ordinary("caches") and is_ordinary("scripted")
    assert not is_ordinary("qwen") and not is_ordinary("Claude")
    assert name_tokens("qwen3-8b") == {"qwen3", "qwen"}
    assert name_tokens("gemma-3-270m") == set()  # gemma is a word; 270m is a size
