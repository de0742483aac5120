"""Prompts a base model can continue.

A base model (the embedded Gemma 3 270M) does not follow instructions: it continues the text
it is given. So every stage's prompt ends where its answer should begin — a heading naming
the answer (``## Your review``) — and never inside an open code fence: a model's text quoted
into a prompt (a review in the judges' view or the chair's packet, a review quoted for
repair) that opened a fence and never closed it (a review cut at its output limit inside its
JSON block) is closed here, or everything after it would read as code to continue. An
instruction-tuned model reads the same prompts as before: the heading is one more line.
"""

from __future__ import annotations

import re

_FENCE_LINE = re.compile(r"^[ \t]*```", re.M)

REVIEW_CUE = "## Your review"
JUDGEMENT_CUE = "## Your judgement"
SYNTHESIS_CUE = "## Your synthesis"


def closed(text: str) -> str:
    """``text`` with a fence it left open closed at its end (an odd number of fence lines)."""
    if len(_FENCE_LINE.findall(text)) % 2:
        return text.rstrip() + "\n```"
    return text


def cued(prompt: str, cue: str) -> str:
    """The prompt, its fences balanced, ending with the heading the answer continues."""
    return f"{closed(prompt).rstrip()}\n\n{cue}\n"
