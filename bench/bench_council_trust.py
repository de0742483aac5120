"""What issue 14's council changes cost: the text tool protocol's prompt against native
tools, the tally with the new grouping against one with nothing to group, and redaction by
identifier against redaction by full name only.

Run by hand: ``.venv/bin/python bench/bench_council_trust.py``. Everything is in-process and
pure (no server): token counts use ``orchestrator.models.estimate`` with gpt-4o's tokenizer (bundled
with litellm, offline); times are the best of 5 repeats. Writes bench/results/council_trust.json.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

from _common import machine, offline, write_result

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def best(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def prompt_tokens() -> dict:
    from orch_plugins.text_tools import as_text
    from orch_plugins.workspace import SCHEMAS

    from orchestrator.models.estimate import estimate_messages
    from orchestrator.tools import Tool

    tools = [Tool(n, d, p, None).schema() for n, (d, p) in SCHEMAS.items()]
    messages = [{"role": "user", "content": "Review app.py and list what is wrong."}]
    native = estimate_messages(messages, tools, "gpt-4o")
    text = estimate_messages(as_text(messages, tools), None, "gpt-4o")
    return {"native_tokens": native, "text_tokens": text, "ratio": round(text / native, 3)}


def findings(n: int, spread: bool) -> list[dict]:
    rng = random.Random(14)
    words = ("timeout socket cache race lock parser frame query injection token key file "
             "retry loop overflow null config migration export escape").split()
    out = []
    for i in range(n):
        claim = " ".join(rng.sample(words, 5))
        where = f"f{i}.py:{i}" if spread else f"app.py:{rng.randint(1, 60)}"
        out.append({"id": f"F{i + 1}", "seat": f"s{i % 6}", "severity": "major",
                    "claim": claim, "location": where})
    return out


def tally_time() -> dict:
    from orchestrator.council.tally import tally

    seats = [f"s{i}" for i in range(6)]
    crowded, spread = findings(200, False), findings(200, True)
    votes = [{"judge": j, "finding": f["id"], "vote": "agree", "reason": ""}
             for f in crowded for j in seats if j != f["seat"]]
    t_crowded = best(lambda: tally(seats, crowded, votes, {}))
    t_spread = best(lambda: tally(seats, spread, votes, {}))
    return {"findings": 200, "one_file_s": round(t_crowded, 4), "spread_s": round(t_spread, 4),
            "ratio": round(t_crowded / t_spread, 2)}


def redaction() -> dict:
    from orchestrator.council.anonymity import identifying_terms, ordinary_words
    from orchestrator.council.bundle import redact
    from orchestrator.models.addressing import ResolvedModel

    t = time.perf_counter()
    ordinary_words()
    load = time.perf_counter() - t
    names = ["openai/gpt-4o-mini", "anthropic/claude-3-5-sonnet-20241022",
             "myvllm/qwen3-8b@hot", "gemini/gemini-1.5-flash", "deepseek/deepseek-coder"]
    models = [ResolvedModel(name=n, provider=n.split("/")[0],
                            litellm_model=n.split("@")[0]) for n in names]
    terms = identifying_terms(models)
    full = sorted({m.name for m in models} | {m.base_name for m in models}, key=len,
                  reverse=True)
    text = ("The local cache in src/client.py is rebuilt per request; as gpt-4o-mini I would "
            "move it. Claude disagrees. ") * 800  # ~100 KB
    t_terms = best(lambda: redact(text, terms))
    t_full = best(lambda: redact(text, full))
    return {"word_list_load_s": round(load, 3), "terms": len(terms), "text_kb": len(text) // 1024,
            "identifiers_s": round(t_terms, 4), "full_names_only_s": round(t_full, 4),
            "ratio": round(t_terms / t_full, 2)}


def main() -> None:
    offline()
    data = {"machine": machine(), "prompt": prompt_tokens(), "tally": tally_time(),
            "redaction": redaction()}
    for key in ("prompt", "tally", "redaction"):
        print(key, data[key])
    write_result("council_trust", data)


if __name__ == "__main__":
    main()
