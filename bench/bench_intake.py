"""What the one intake costs (docs/performance.md#the-intake).

1. A leg's conversation of STEPS steps, each adding a 12 kB tool result, admitted before
   every request: with the wave's memory (each message scanned once) against scanning every
   message at every step (the baseline, measured in the same run).
2. The anonymity rules on a 50 kB review bundle: folded (NFKC, confusables) against the
   same search on the text unfolded, ASCII and with 1% look-alike letters.

Run: .venv/bin/python bench/bench_intake.py
"""

from __future__ import annotations

import random
import time

STEPS = 20


def conversation_cost() -> tuple[float, float]:
    from orchestrator.intake import Policy, admit, admit_text
    from orchestrator.request import Request

    rng = random.Random(1)
    words = ["def", "return", "self", "value", "cache", "if", "else", "for", "in", "token"]
    result = lambda: " ".join(rng.choice(words) for _ in range(2400))  # noqa: E731 - ~12 kB
    briefing = {"role": "user", "content": result()}
    turns = []
    for step in range(STEPS):
        turns += [{"role": "assistant", "content": f"step {step}"},
                  {"role": "tool", "tool_call_id": str(step), "content": result()}]
    t0 = time.perf_counter()
    policy = Policy()
    for step in range(1, STEPS + 1):
        admit(Request(model="p/m", messages=[briefing, *turns[:2 * step]]), policy)
    memo = time.perf_counter() - t0
    t0 = time.perf_counter()
    for step in range(1, STEPS + 1):
        for m in [briefing, *turns[:2 * step]]:
            admit_text(m["content"])
    every = time.perf_counter() - t0
    return memo, every


def anonymity_cost() -> dict[str, float]:
    from orchestrator.council.anonymity import identifying_terms
    from orchestrator.intake import Anonymity
    from orchestrator.intake.anonymity import compiled
    from orchestrator.models.addressing import ResolvedModel

    models = [ResolvedModel(name=n, provider=n.split("/")[0], litellm_model=n)
              for n in ("openai/gpt-4o", "anthropic/claude-3-5-sonnet", "gw/qwen2.5-72b")]
    anon = Anonymity(tuple(identifying_terms(models)))
    rng = random.Random(2)
    prose = ("The query builder concatenates user input, a classic injection. " * 800)[:50_000]
    lookalike = "".join("\u0430" if c == "a" and rng.random() < 0.01 else c for c in prose)
    out = {}
    for name, text in (("ascii", prose), ("look-alikes", lookalike)):
        t0 = time.perf_counter()
        for _ in range(5):
            anon.redact(text)
        out[f"folded {name}"] = (time.perf_counter() - t0) / 5
        pattern = compiled(anon.terms)
        t0 = time.perf_counter()
        for _ in range(5):
            pattern.sub("[redacted]", text)
        out[f"unfolded {name}"] = (time.perf_counter() - t0) / 5
    return out


def main() -> None:
    from orchestrator.intake import admit_text

    admit_text("warm the scanner")  # its regular expressions compile once
    memo, every = conversation_cost()
    print(f"{STEPS}-step conversation: remembered {memo * 1000:.0f} ms, rescanned every step "
          f"{every * 1000:.0f} ms ({every / memo:.1f}x)")
    for name, seconds in anonymity_cost().items():
        print(f"anonymity on 50 kB, {name}: {seconds * 1000:.1f} ms")


if __name__ == "__main__":
    main()
