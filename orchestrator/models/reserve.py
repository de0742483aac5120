"""The room kept free for an answer, proportional to the context window.

A fixed margin refuses every request on a small window (4,096 tokens kept on a 4,096-token
window leaves nothing for "hi"). The reserve follows the window instead:
``min(20,000, max(2,048, 15 % of the window))`` - and, like the runtime's own clamp of
``max_tokens`` to what the window has left, it never takes more than half the window, so a
2,048-token slot (the embedded model's) still holds a 1,024-token prompt. The context guard
refuses and fits against it; the workspace read guard keeps it free.
"""

from __future__ import annotations

CAP = 20_000
FLOOR = 2_048
SHARE = 0.15


def answer_reserve(window: int) -> int:
    """Tokens kept free for the answer on a ``window``-token model."""
    return min(CAP, max(FLOOR, int(window * SHARE)), window // 2)
