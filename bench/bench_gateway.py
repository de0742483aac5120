"""What a LiteLLM proxy in the path costs per request: orch's server calls straight to the
scripted server, against the same calls through a real proxy (examples/team/proxy.yaml).

Run by hand (needs the ``gateway`` extra): ``.venv/bin/python bench/bench_gateway.py
[--requests 40] [--burst 16] [--rounds 3]``. Each round, interleaved so background load hits
both alike: ``--requests`` calls one after another (latency per request), then ``--burst``
calls at once (the wall time of a 16-leg wave's requests). Both go through
``orchestrator.models.server.Server.complete`` — rate gate, usage and cost included — to a scripted
server answering at once, so the figures are the proxy's own overhead. Writes
bench/results/gateway.json.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import machine, offline, write_result

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


async def calls(model, n: int, concurrent: bool) -> list[float]:
    """Seconds per call (sequential), or the one wall time of ``n`` calls at once."""
    import anyio

    from orchestrator.intake import Policy, admit
    from orchestrator.models.server import Server
    from orchestrator.request import Request

    server = Server(timeout_s=60)
    request = admit(Request(model=model.name,
                            messages=[{"role": "user", "content": "Say hello."}]), Policy())
    if not concurrent:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            await server.complete(model, request)
            out.append(time.perf_counter() - t0)
        return out
    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(server.complete, model, request)
    return [time.perf_counter() - t0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--burst", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    offline()
    import anyio

    from orchestrator.models import gate
    from orchestrator.models.addressing import ResolvedModel
    from orchestrator.testing.litellm_proxy import LiteLLMProxy, missing_modules
    from orchestrator.testing.scripted_server import Reply, ScriptedServer

    if missing_modules():
        sys.exit(f"the gateway extra is not installed: missing {', '.join(missing_modules())}")
    home = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    for name in ("proxy.yaml", "team_keys.py"):
        shutil.copy(ROOT / "examples" / "team" / name, home / name)
    key = f"sk-bench-{secrets.token_hex(16)}"
    (home / "keys.json").write_text(json.dumps({key: {"user_id": "bench"}}))
    os.environ["ORCH_BENCH_KEY"] = key
    usage = {"prompt_tokens": 1000, "completion_tokens": 500}
    with ScriptedServer() as upstream:
        upstream.script("gpt-4o", Reply(text="ok", usage=usage))
        env = {"UPSTREAM_API_BASE": upstream.url, "UPSTREAM_API_KEY": "sk-upstream-bench",
               "LITELLM_MASTER_KEY": f"sk-master-{secrets.token_hex(16)}",
               "TEAM_KEYS_FILE": str(home / "keys.json")}
        t0 = time.perf_counter()
        with LiteLLMProxy(home / "proxy.yaml", env=env) as proxy:
            start_s = time.perf_counter() - t0
            direct = ResolvedModel(name="up/gpt-4o", provider="up", litellm_model="openai/gpt-4o",
                                   api_base=upstream.url, declared=True)
            via = ResolvedModel(name="team/deep", provider="team", litellm_model="openai/deep",
                                api_base=proxy.url, api_key_env="ORCH_BENCH_KEY", declared=True)
            anyio.run(calls, via, 3, False)  # warm both paths (connections, the proxy's router)
            anyio.run(calls, direct, 3, False)
            seq = {"direct": [], "proxy": []}
            burst = {"direct": [], "proxy": []}
            for _ in range(args.rounds):
                for name, model in (("direct", direct), ("proxy", via)):
                    gate.reset()
                    seq[name] += anyio.run(calls, model, args.requests, False)
                    burst[name] += anyio.run(calls, model, args.burst, True)
    shutil.rmtree(home, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in seq.items()}
    wall = {k: statistics.median(v) for k, v in burst.items()}
    result = {
        "machine": machine(), "load_avg": os.getloadavg(), "args": vars(args),
        "proxy_start_s": round(start_s, 2),
        "sequential_median_ms": {k: round(v * 1000, 2) for k, v in med.items()},
        "overhead_per_request_ms": round((med["proxy"] - med["direct"]) * 1000, 2),
        "sequential_ratio": round(med["proxy"] / med["direct"], 2),
        "burst_wall_median_s": {k: round(v, 3) for k, v in wall.items()},
        "burst_ratio": round(wall["proxy"] / wall["direct"], 2),
    }
    print(json.dumps(result, indent=2))
    write_result("gateway", result)


if __name__ == "__main__":
    main()
