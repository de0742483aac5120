"""What streaming costs per request: N concurrent chat requests to the scripted server with
the arguments orch sends (``Server.call_kwargs``: a declared provider's prices, no retries),
answered as one JSON body (``stream`` off) against as server-sent events read whole by
``models/streamed.read`` (what every leg does now), interleaved round by round so background
load hits both alike.

Run by hand: ``.venv/bin/python bench/bench_stream.py [--requests 50] [--rounds 3]
[--words N]`` (the scripted server streams a word a chunk: ``--words 500`` is an answer of
~500 chunks, as a provider streaming a token a chunk sends a 500-token answer).
Writes bench/results/stream.json.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from _common import machine, offline, write_result

TEXT = "The answer is forty two, as computed from the figures in the briefing above."


async def one(lm, kwargs: dict, stream: bool) -> None:
    from orchestrator.models import streamed

    if stream:
        await streamed.read(await lm.acompletion(**kwargs), kwargs["messages"])
    else:
        plain = {k: v for k, v in kwargs.items() if k not in streamed.STREAM_KWARGS}
        await lm.acompletion(**plain)


async def main(args) -> dict:
    from orchestrator import runtime
    from orchestrator.config import Config
    from orchestrator.intake import Policy, admit
    from orchestrator.models.resolve import resolve_all
    from orchestrator.models.server import Server
    from orchestrator.plugin_host.plugins import load
    from orchestrator.request import Request
    from orchestrator.testing.scripted_server import Reply, ScriptedServer

    lm = runtime.litellm()
    with ScriptedServer() as srv:
        text = " ".join(f"w{i}" for i in range(args.words)) if args.words else TEXT
        srv.script("m", lambda body, n: Reply(text=text))
        cfg = Config.load()
        cfg.providers["bench"] = {"base_url": srv.url, "input_cost_per_mtok": 1.0,
                                  "output_cost_per_mtok": 1.0}
        cfg.save()
        runtime.config.cache_clear()
        model = resolve_all(["bench/m"], runtime.config(), load(enabled=False))[0]
        request = Request(model="bench/m", messages=[{"role": "user", "content": "q"}])
        kwargs = Server().call_kwargs(model, admit(request, Policy()))
        for stream in (False, True):  # warm both paths
            await asyncio.gather(*[one(lm, kwargs, stream) for _ in range(5)])
        times: dict[str, list[float]] = {"plain": [], "streamed": []}
        for _ in range(args.rounds):
            for stream in (False, True):
                t0 = time.perf_counter()
                await asyncio.gather(*[one(lm, kwargs, stream) for _ in range(args.requests)])
                times["streamed" if stream else "plain"].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"requests": args.requests, "rounds": args.rounds, "words": args.words or 14,
            "seconds": times,
            "median_s": med, "ratio_streamed_over_plain": med["streamed"] / med["plain"],
            "ms_per_request": {k: 1000 * v / args.requests for k, v in med.items()}}


if __name__ == "__main__":
    import os
    import tempfile

    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--words", type=int, default=0,
                        help="answers of this many words (a chunk each) instead of 14")
    args = parser.parse_args()
    offline()
    os.environ["ORCH_HOME"] = tempfile.mkdtemp(prefix="orch-bench-stream-")
    result = asyncio.run(main(args))
    result["machine"] = machine()
    print(result)
    write_result("stream", result)
