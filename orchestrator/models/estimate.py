"""Token estimates before a request is sent (the provider's count arrives only after).

Guards need the prompt's size *before* sending: to fit ``max_tokens`` inside the context
window, to refuse a request that has no room left to answer. A flat characters/4 is up to
~2.5x low on CSV (digits and commas are short tokens) and 15-30 % off on prose and code, so:

1. litellm's token counter (tiktoken, or the model's bundled tokenizer) where it works
   offline: exact for OpenAI-style tokenizers, a close proxy for the rest;
2. otherwise a format-aware count: the text is classified (prose, code, JSON, CSV), split
   the way BPE pre-tokenisers split it (words, 1-3 digit groups, punctuation runs, spaces)
   and each piece counted, with a per-kind correction measured against litellm's counter.

``bench/bench_estimate.py`` measures both against litellm's counter on a corpus of each
kind; the figures are in docs/performance.md. Counts are cached by text, so the briefing a
wave's 64 legs share is counted once, and a growing conversation only counts its new turns.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

KINDS = ("prose", "code", "json", "csv")

# tokens per BPE piece, by kind: the mean of litellm's count / piece count on the bench
# corpus (bench/bench_estimate.py prints the current values as "calibration").
PIECE_FACTOR = {"prose": 1.06, "code": 1.07, "json": 1.1, "csv": 1.12}
MESSAGE_OVERHEAD = 4  # role and separators, per message (OpenAI's chat format uses 3-4)
REPLY_PRIMING = 3  # the assistant header every chat prompt ends with

# Roughly the GPT-style pre-tokeniser: contractions, a letter run with one leading
# non-letter, 1-3 digit groups, punctuation runs, newlines, other whitespace.
_PIECES = re.compile(r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\w]?[^\W\d_]+|\d{1,3}"""
                     r"""| ?[^\s\w]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
_LONG_WORD = 6  # letters a common word token holds; longer runs split about every 5
_SAMPLE = 4096  # characters looked at to decide a text's kind
_CODE_HINTS = re.compile(r"^\s*(def |class |import |from \S+ import|function |return\b|if\b.*[:{]$"
                         r"|for\b.*[:{]$|#include|public |private |const |let |var |fn |"
                         r"package |[}\])];?$)", re.M)


def kind_of(text: str) -> str:
    """``prose``, ``code``, ``json`` or ``csv``, judged from the first few KB (which may
    start mid-document: a window of a long JSON file is still JSON)."""
    sample = text[:_SAMPLE]
    if not sample.strip():
        return "prose"
    lines = [ln for ln in sample.splitlines() if ln.strip()][:60]
    if sample.count('"') >= 0.04 * len(sample) and sample.count('":') >= max(3, len(sample) // 300):
        return "json"
    if len(lines) >= 5:
        rows = lines[1:-1]  # the first and last may be cut
        for sep in (",", "\t", ";", "|"):
            counts = [ln.count(sep) for ln in rows]
            common = max(set(counts), key=counts.count)
            if common >= 1 and counts.count(common) >= 0.9 * len(counts):
                return "csv"
    hinted = len(_CODE_HINTS.findall(sample))
    symbols = sum(sample.count(c) for c in "{}()[];=<>") / len(sample)
    if hinted >= max(2, len(lines) // 8) or (symbols >= 0.03 and len(lines) >= 3):
        return "code"
    return "prose"


def heuristic_tokens(text: str, kind: str | None = None) -> int:
    """The format-aware count used where litellm's counter is unavailable."""
    if not text:
        return 0
    pieces = 0
    for match in _PIECES.finditer(text):
        piece = match.group()
        core = piece.strip()
        if not core.isascii():
            pieces += len(core)  # CJK and most non-Latin scripts: about a token a character
        elif len(core) > _LONG_WORD and core.isalpha():
            pieces += 1 + (len(core) - _LONG_WORD) // 5
        else:
            pieces += 1
    return max(1, round(pieces * PIECE_FACTOR[kind or kind_of(text)]))


def flat_tokens(text: str) -> int:
    """characters / 4: the rule of thumb this module replaces (kept for the benchmark)."""
    return len(text) // 4 + 1 if text else 0


@functools.lru_cache(maxsize=1)
def _counter_available() -> bool:
    try:
        from orchestrator.runtime import litellm

        return litellm().token_counter(text="probe") > 0
    except Exception:
        return False


@functools.lru_cache(maxsize=256)
def _tokenizer_name(model: str | None) -> str | None:
    """The model name to hand litellm's counter, or None for its default (tiktoken).
    Tokenizers litellm would download from the Hugging Face hub (llama) are avoided: an
    estimate must never touch the network."""
    if not model:
        return None
    try:
        from litellm.utils import huggingface_tokenizer_kind

        kind = huggingface_tokenizer_kind(model)
    except Exception:
        return None
    return model if kind in (None, "anthropic", "deepseek") else None


@functools.lru_cache(maxsize=4096)
def _count(text: str, tokenizer: str | None, exact: bool) -> int:
    if exact:
        try:
            from orchestrator.runtime import litellm

            return int(litellm().token_counter(model=tokenizer, text=text))
        except Exception:
            pass
    return heuristic_tokens(text)


def estimate_text(text: str, model: str | None = None, *, exact: bool = True) -> int:
    """Tokens in ``text`` for ``model`` (a litellm model name). ``exact=False`` skips
    litellm's counter (no import; the format-aware count only)."""
    if not text:
        return 0
    use_counter = exact and _counter_available()
    return _count(text, _tokenizer_name(model) if use_counter else None, use_counter)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: count the text, describe the rest
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text") or ""))
            else:
                parts.append(json.dumps(part, default=str))
        return "\n".join(parts)
    return json.dumps(content, default=str)


def estimate_message(message: dict[str, Any], model: str | None = None, *,
                     exact: bool = True) -> int:
    total = MESSAGE_OVERHEAD
    content = message.get("content")
    if content is not None:
        total += estimate_text(_content_text(content), model, exact=exact)
    if message.get("tool_calls"):
        total += estimate_text(json.dumps(message["tool_calls"]), model, exact=exact)
    return total


def estimate_messages(messages: list[dict[str, Any]], tools: list[dict] | None = None,
                      model: str | None = None, *, exact: bool = True) -> int:
    """Tokens a request's messages (and tool schemas) will take, with per-message overhead."""
    total = REPLY_PRIMING if messages else 0
    total += sum(estimate_message(m, model, exact=exact) for m in messages)
    if tools:
        total += estimate_text(json.dumps(tools), model, exact=exact)
    return total
