"""What doom-loop stripping saves, and what JSON repair costs per tool call.

Run by hand: ``.venv/bin/python bench/bench_doom_loop.py [--max-steps 20] [--number N]``.

1. A scripted looping model (the scripted server, real HTTP through litellm, the real
   workspace ``read``/``grep`` on a 2 KB file) runs one leg with every built-in plugin, then
   again with ``ORCH_DISABLE_PLUGINS=doom_loop``: requests and tokens until the leg ends.
   Scenarios: one call repeated (default tier, K=3), two calls in turn, one call repeated on
   the minimal tier (K=2). Token counts are the server's (prompt chars / 4), so they are
   deterministic: the ratio is the saving.
2. ``mend()`` per call (µs, best of 5 rounds of N calls) on valid, broken and unrepairable
   arguments, against ``json.loads`` of the same valid text measured in the same run; and the
   one-time cost of the lazy imports (json_repair, jsonschema) in a fresh interpreter.

Writes bench/results/doom_loop.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path

from _common import machine, offline, write_result

READ = '{"path": "src/app.py"}'
GREP = '{"pattern": "def main"}'
SCENARIOS = {
    "one call repeated (default tier, K=3)": ([("read", READ)], "default"),
    "two calls in turn (A B A B)": ([("read", READ), ("grep", GREP)], "default"),
    "one call repeated (minimal tier, K=2)": ([("read", READ)], "minimal"),
}
SCHEMA = {"type": "object", "properties": {
    "path": {"type": "string"}, "offset": {"type": "integer", "minimum": 1},
    "limit": {"type": "integer", "minimum": 1}}, "required": ["path"]}
REPAIR_CASES = {
    "valid, fits the schema": '{"path": "src/app.py", "offset": 10, "limit": 40}',
    "single quotes + trailing comma": "{'path': 'src/app.py', 'offset': 10, 'limit': 40,}",
    "camelCase key + \"40\" for an integer": '{"Path": "src/app.py", "limit": "40"}',
    "unbalanced + comment": '{"path": "src/app.py", // the app\n "limit": 40',
    "unrepairable (no path)": '{"limit": "forty"}',
}


def looping(calls):
    from orchestrator.testing.scripted_server import Reply

    def reply(body, n):
        if not body.get("tools"):
            return Reply(text="src/app.py defines main(), which starts the server.")
        name, arguments = calls[n % len(calls)]
        return Reply(tool_calls=[{"name": name, "arguments": arguments}])

    return reply


def run_leg(kit, server, calls, tier: str, doom_loop: bool, workspace: Path, max_steps: int):
    if doom_loop:
        os.environ.pop("ORCH_DISABLE_PLUGINS", None)
    else:
        os.environ["ORCH_DISABLE_PLUGINS"] = "doom_loop"
    kit.config(plugin_config={"tiers": {"models": {"scripted/loop": tier}}})
    server.script("loop", looping(calls))
    run = kit.run_leg("loop", "What does src/app.py do?", workspace=workspace,
                      max_steps=max_steps, options={"tools": "read"})
    usage = run.leg["usage"]
    return {"requests": len(run.bodies), "input_tokens": usage["input_tokens"],
            "output_tokens": usage["output_tokens"],
            "tokens": usage["input_tokens"] + usage["output_tokens"],
            "doom_loop": run.leg.get("doom_loop"), "stopped": run.leg.get("stopped")}


def loops(max_steps: int) -> dict:
    from orchestrator.testing.kit import OrchKit
    from orchestrator.testing.scripted_server import ScriptedServer

    results = {}
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp, ScriptedServer() as server:
        home, workspace = Path(tmp) / "home", Path(tmp) / "ws"
        home.mkdir()
        (workspace / "src").mkdir(parents=True)
        (workspace / "src" / "app.py").write_text(
            "".join(f"def f{i}(x):\n    return x * {i}  # step {i}\n" for i in range(40))
            + "def main():\n    serve()\n")
        os.environ["ORCH_HOME"] = str(home)
        kit = OrchKit(home=home, server=server)
        kit.provider()
        for name, (calls, tier) in SCENARIOS.items():
            without = run_leg(kit, server, calls, tier, False, workspace, max_steps)
            with_ = run_leg(kit, server, calls, tier, True, workspace, max_steps)
            results[name] = {"without": without, "with": with_,
                             "request_ratio": without["requests"] / with_["requests"],
                             "token_ratio": without["tokens"] / with_["tokens"]}
    os.environ.pop("ORCH_DISABLE_PLUGINS", None)
    return results


def repair_costs(number: int) -> dict:
    from orch_plugins.json_repair import mend

    def per_call_us(fn) -> float:
        fn()  # warm: lazy imports, the validator cache
        return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6

    valid = REPAIR_CASES["valid, fits the schema"]
    costs = {"json.loads (baseline)": per_call_us(lambda: json.loads(valid))}
    for name, raw in REPAIR_CASES.items():
        costs[name] = per_call_us(lambda raw=raw: mend(raw, SCHEMA))
    return costs


def first_call_ms() -> float:
    """The lazy imports a process pays once, on its first repair (fresh interpreter)."""
    code = ("import time; t = time.perf_counter(); from orch_plugins.json_repair import mend; "
            f"mend({REPAIR_CASES['single quotes + trailing comma']!r}, {SCHEMA!r}); "
            "print((time.perf_counter() - t) * 1000)")
    runs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True).stdout) for _ in range(3)]
    return min(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--number", type=int, default=2000)
    args = parser.parse_args()
    offline()

    loop_results = loops(args.max_steps)
    print(f"Looping model, --max-steps {args.max_steps}: without doom_loop → with it")
    print(f"{'scenario':<40} {'requests':>10} {'tokens':>18} {'saved':>7}")
    for name, r in loop_results.items():
        w, d = r["without"], r["with"]
        print(f"{name:<40} {w['requests']:>4} → {d['requests']:<3} "
              f"{w['tokens']:>8,} → {d['tokens']:<7,} {r['token_ratio']:>5.1f}x")

    costs = repair_costs(args.number)
    base = costs["json.loads (baseline)"]
    print(f"\nmend() per call (best of 5 × {args.number}):")
    for name, us in costs.items():
        print(f"{name:<40} {us:>8.1f} µs  {us / base:>6.1f}x json.loads")
    first = first_call_ms()
    print(f"first repair in a fresh process (lazy imports): {first:.0f} ms")

    write_result("doom_loop", {"machine": machine(), "max_steps": args.max_steps,
                               "loops": loop_results, "repair_us": costs,
                               "first_repair_ms": first})


if __name__ == "__main__":
    main()
