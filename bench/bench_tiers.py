"""The baseline every request pays: system prompt and tool-schema tokens, per capability tier.

Run by hand: ``.venv/bin/python bench/bench_tiers.py``. One leg per case runs in-process
against the scripted server with the built-in plugins loaded, exactly as ``orch fanout`` would
send it; the first request's body is taken off the wire and its system prompt and ``tools``
are counted with ``litellm.token_counter`` (tiktoken's o200k encoding for ``gpt-4o``, bundled
with litellm, so it works offline) and with orch's own estimator
(``orchestrator.models.estimate.heuristic_tokens``, what is used where litellm's counter is not).
The default tier is the baseline; minimal is reported as a ratio of it. Writes
bench/results/tiers.json.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from _common import machine, offline, write_result

CASES = {
    # name: (model on the scripted provider, wave options)
    "default tier, --tools read": ("reviewer-70b", {"tools": "read"}),
    "minimal tier, --tools read": ("qwen3-4b", {"tools": "read"}),
    "default tier, --tools none": ("reviewer-70b", {"tools": "none"}),
    "minimal tier, --tools none": ("qwen3-4b", {"tools": "none"}),
}
TOKENIZER = "gpt-4o"


def wire_bodies(home: Path, workspace: Path) -> dict[str, dict]:
    from orchestrator.testing.kit import OrchKit
    from orchestrator.testing.scripted_server import ScriptedServer

    os.environ["ORCH_HOME"] = str(home)
    out = {}
    with ScriptedServer() as server:
        kit = OrchKit(home=home, server=server)
        for name, (model, options) in CASES.items():
            run = kit.run_leg(model, "Review the code.", workspace=workspace, options=options)
            out[name] = run.bodies[0]
    return out


def count(body: dict) -> dict:
    from orchestrator.models.estimate import heuristic_tokens
    from orchestrator.runtime import litellm

    lm = litellm()
    system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
    tools = body.get("tools") or []
    probe = [{"role": "user", "content": "x"}]
    tools_exact = (lm.token_counter(model=TOKENIZER, messages=probe, tools=tools)
                   - lm.token_counter(model=TOKENIZER, messages=probe)) if tools else 0
    return {
        "system_tokens": lm.token_counter(model=TOKENIZER, text=system) if system else 0,
        "tools_tokens": tools_exact,
        "system_estimate": heuristic_tokens(system) if system else 0,
        "tools_estimate": heuristic_tokens(json.dumps(tools)) if tools else 0,
        "tools": sorted(t["function"]["name"] for t in tools),
        "sampling": {k: body[k] for k in ("temperature", "top_p") if k in body},
    }


def main() -> None:
    offline()
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        home, workspace = Path(tmp) / "home", Path(__file__).resolve().parents[1]
        home.mkdir()
        bodies = wire_bodies(home, workspace)
    rows = {name: count(body) for name, body in bodies.items()}
    for row in rows.values():
        row["total_tokens"] = row["system_tokens"] + row["tools_tokens"]
        row["total_estimate"] = row["system_estimate"] + row["tools_estimate"]
    base = rows["default tier, --tools read"]["total_tokens"]
    print(f"{'case':<28} {'system':>7} {'tools':>6} {'total':>6} {'x default':>9} "
          f"{'estimate':>8}  roster")
    for name, row in rows.items():
        ratio = row["total_tokens"] / base if base else float("nan")
        row["ratio_to_default"] = round(ratio, 3)
        print(f"{name:<28} {row['system_tokens']:>7} {row['tools_tokens']:>6} "
              f"{row['total_tokens']:>6} {ratio:>9.2f} {row['total_estimate']:>8}  "
              f"{','.join(row['tools']) or '-'}")
    print(f"counted with litellm.token_counter(model={TOKENIZER!r}); estimate = "
          "orchestrator.models.estimate.heuristic_tokens")
    write_result("tiers", {"machine": machine(), "tokenizer": TOKENIZER, "cases": rows})


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
