"""A warm `orch mcp` tool call against a fresh `orch fanout` process, side by side.

One single-leg fanout at 0 ms latency on the scripted server (its own process), the same
briefing both ways, interleaved: ``orch fanout -q --json`` as a new process (wall time, what a
coding agent pays when it shells out), and a ``fanout`` tool call on one `orch mcp` started
once (round-trip time through the MCP SDK's own stdio client). Also: `orch mcp`'s start (spawn
to the tools list) and a free call (``spend``). Medians of ``--runs``.

Run by hand: ``.venv/bin/python bench/bench_mcp.py [--runs 10]``. Writes
bench/results/mcp.json. Bytecode as in bench_help.py (a bench-owned PYTHONPYCACHEPREFIX,
filled by an untimed warm-up).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from _common import OFFLINE, machine, scripted_server, write_result


async def measure(orch: str, env: dict[str, str], runs: int, cwd: str) -> dict[str, list]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    args = {"models": ["bench/m"], "prompt": "Say hi.", "tools": "none"}
    argv = [orch, "fanout", "-m", "bench/m", "-p", "Say hi.", "--tools", "none", "-q", "--json"]
    samples: dict[str, list] = {"fresh orch fanout (process wall)": [],
                                "orch mcp fanout call (warm)": [],
                                "orch mcp spend call (warm)": [],
                                "orch mcp start (spawn to tools/list)": []}
    for _ in range(max(1, runs // 3)):  # the server's own start, a few times
        t0 = time.perf_counter()
        params = StdioServerParameters(command=orch, args=["mcp"], env=env, cwd=cwd)
        with open(os.devnull, "w") as devnull:
            async with stdio_client(params, errlog=devnull) as (r, w), \
                    ClientSession(r, w) as session:
                await session.initialize()
                await session.list_tools()
                samples["orch mcp start (spawn to tools/list)"].append(time.perf_counter() - t0)
    params = StdioServerParameters(command=orch, args=["mcp"], env=env, cwd=cwd)
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (r, w), \
                ClientSession(r, w) as session:
            await session.initialize()
            await session.call_tool("fanout", args)  # the first call: untimed
            for _ in range(runs):
                t0 = time.perf_counter()
                out = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
                samples["fresh orch fanout (process wall)"].append(time.perf_counter() - t0)
                assert out.returncode == 0, out.stderr[-500:]
                t0 = time.perf_counter()
                result = await session.call_tool("fanout", args)
                samples["orch mcp fanout call (warm)"].append(time.perf_counter() - t0)
                assert not result.is_error, result.content
                t0 = time.perf_counter()
                await session.call_tool("spend", {})
                samples["orch mcp spend call (warm)"].append(time.perf_counter() - t0)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    orch = os.path.join(os.path.dirname(sys.executable), "orch")
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        script = Path(tmp) / "script.json"
        script.write_text(json.dumps({"m": [{"text": "hi"}]}))
        with scripted_server(latency_ms=0, script=script) as url:
            home = Path(tmp) / "home"
            home.mkdir()
            (home / "config.json").write_text(json.dumps(
                {"providers": {"bench": {"base_url": url}}}))
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env.update(OFFLINE, ORCH_HOME=str(home),
                       PYTHONPYCACHEPREFIX=os.path.join(tmp, "pyc"))
            subprocess.run([orch, "fanout", "-m", "bench/m", "-p", "warm-up", "--tools", "none",
                            "-q"], env=env, cwd=tmp, capture_output=True, check=True)
            samples = anyio.run(measure, orch, env, args.runs, tmp)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    fresh = medians["fresh orch fanout (process wall)"]
    warm = medians["orch mcp fanout call (warm)"]
    for name, value in medians.items():
        print(f"{name:40s} {value * 1000:8.1f} ms median of {len(samples[name])}")
    print(f"fresh process / warm call: {fresh / warm:.1f}×")
    write_result("mcp", {"runs": args.runs, "machine": machine(),
                         "median_s": medians, "fresh_over_warm": fresh / warm,
                         "samples_s": samples})


if __name__ == "__main__":
    main()
