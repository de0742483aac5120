"""A deliberation's requests and prompt characters per round, and its wall time against plain
fanouts.

Run by hand: ``.venv/bin/python bench/bench_deliberation.py [--legs 8] [--latency-ms 500]``.

1. **Characters**: the 3-leg LRU-cache question of issue 30 through the real ``orch fanout
   --rounds 3 --chair`` (in-process CLI, scripted server in this process): round 1 the three
   answers differ, round 2 two legs adopt the third's (every leg then holds one answer: an
   orch that stops on it sends no round 3). From the server's request log: requests and
   prompt characters (the text of every message sent) per round. Target: the whole run ≤ 1/10
   of MassGen's 124,546 characters for the same work.
2. **Wall time**: a 3-round deliberation of ``--legs`` legs (every leg revises in round 2 and
   keeps in round 3) against 3 sequential plain fanouts of the same legs, both in this process
   on the engine (no start-up counted), the scripted server as its own process at
   ``--latency-ms``. Runs alternate; the median of ``--reps`` is reported. Target ≤ 1.1×.

Writes bench/results/deliberation.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import (
    PROVIDER,
    engine_setup,
    machine,
    offline,
    scripted_server,
    write_result,
)

MASSGEN_CHARS = 124_546
QUESTION = "How do I build an LRU cache in Python?"
ANSWERS = {
    "a": "Keep a dict from key to node and a doubly linked list in use order; on get, move the "
         "node to the front; on put, insert at the front and evict the tail past capacity.",
    "b": "Subclass collections.OrderedDict: on get call move_to_end(key); on put set the item, "
         "move_to_end, and popitem(last=False) when len(self) > capacity.",
    "c": "Use functools.lru_cache(maxsize=128) on the function whose results you cache; it is "
         "thread-safe, C-accelerated and exposes cache_info() and cache_clear().",
}


def block(**data) -> str:
    return f"```json\n{json.dumps(data)}\n```"


def chars_part() -> dict:
    """The 3-leg question end to end; prompt characters per round from the request log."""
    from click.testing import CliRunner

    from orchestrator import runtime
    from orchestrator.cli import cli
    from orchestrator.config import Config
    from orchestrator.testing.scripted_server import Reply, ScriptedServer

    def leg(model):
        def reply(body, n):
            prompt = body["messages"][-1]["content"]
            if n == 0:
                return Reply(text=ANSWERS[model])
            shown = dict(re.findall(r"<<<(Answer [A-Z]) \[\w+\]\n(.*?)\n", prompt))
            target = next((lb for lb, text in shown.items() if "lru_cache" in text), None)
            vote = target or sorted(shown)[0]
            if n == 1 and model != "c":
                return Reply(text=block(decision="adopt", adopt=target, vote=target,
                                        reason="the standard library already does this"))
            return Reply(text=block(decision="keep", vote=vote, reason="correct and short"))
        return reply

    with tempfile.TemporaryDirectory() as home, ScriptedServer() as srv:
        os.environ["ORCH_HOME"] = home
        runtime.config.cache_clear()
        runtime.plugin_manager.cache_clear()
        cfg = Config.load()
        cfg.providers[PROVIDER] = {"base_url": srv.url}
        cfg.save()
        runtime.config.cache_clear()
        for m in ANSWERS:
            srv.script(m, leg(m))
        srv.script("chair", Reply(text="Use functools.lru_cache unless you need a custom "
                                       "eviction policy; then OrderedDict."))
        result = CliRunner().invoke(cli, [
            "fanout", "-m", ",".join(f"{PROVIDER}/{m}" for m in ANSWERS), "-p", QUESTION,
            "--tools", "none", "--rounds", "3", "--chair", f"{PROVIDER}/chair", "--json", "-q"])
        if result.exit_code != 0:
            raise RuntimeError(result.output)
        doc = json.loads(result.stdout)
        per_round: dict[str, dict] = {}
        for r in srv.chats:
            prompt = r.body["messages"][-1]["content"]
            key = ("chair" if r.body["model"].endswith("chair") else
                   m.group(1) if (m := re.match(r"Round (\d+) of", prompt)) else "1")
            chars = sum(len(str(msg.get("content") or "")) for msg in r.body["messages"])
            entry = per_round.setdefault(key, {"requests": 0, "prompt_chars": 0})
            entry["requests"] += 1
            entry["prompt_chars"] += chars
        total = sum(e["prompt_chars"] for e in per_round.values())
        return {"stop": doc["stop"], "winner_votes": doc["winner"]["votes"],
                "per_round": per_round, "requests": len(srv.chats),
                "prompt_chars": total, "massgen_chars": MASSGEN_CHARS,
                "ratio_to_massgen": round(total / MASSGEN_CHARS, 4),
                "target_met": total <= MASSGEN_CHARS / 10}


def wall_part(legs: int, latency_ms: float, reps: int) -> dict:
    import anyio

    from orchestrator.deliberation.run import Deliberation
    from orchestrator.engine.ledger_sink import LedgerSink
    from orchestrator.engine.wave import Wave, WaveSpec
    from orchestrator.models.resolve import resolve_all

    runs_total = reps * 2
    names = [[f"d{rep}m{i}" for i in range(legs)] for rep in range(runs_total)]
    script = {}
    for rep_names in names:
        for i, n in enumerate(rep_names):
            script[n] = [{"text": f"answer {i}"},
                         {"text": f"revised answer {i}\n" + block(decision="revise", vote="A",
                                                                   reason="x")},
                         {"text": block(decision="keep", vote="A", reason="x")}]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "script.json"
        path.write_text(json.dumps(script))
        with scripted_server(latency_ms=latency_ms, script=path) as url:
            cfg, pm = engine_setup(Path(tmp) / "home", url)
            times = {"deliberation": [], "fanouts": []}
            for rep in range(reps):
                for side in ("deliberation", "fanouts") if rep % 2 == 0 else ("fanouts",
                                                                             "deliberation"):
                    models = resolve_all([f"{PROVIDER}/{n}" for n in names.pop()], cfg, pm)
                    runs = Path(tmp) / f"runs-{side}-{rep}"

                    def spec(models=models, runs=runs):
                        return WaveSpec(models=models, briefing=QUESTION, runs_dir=runs,
                                        options={"tools": "none"})
                    t0 = time.perf_counter()
                    if side == "deliberation":
                        run = Deliberation(spec(), pm=pm, config=cfg, rounds=3, peers=None,
                                           ledger=LedgerSink())
                        doc = anyio.run(run.run)
                        assert len(doc["rounds"]) == 3, doc["stop"]
                    else:
                        for _ in range(3):
                            anyio.run(Wave(spec(), pm=pm, config=cfg, ledger=LedgerSink()).run)
                    times[side].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["deliberation"] / med["fanouts"]
    return {"legs": legs, "latency_ms": latency_ms, "reps": reps, "seconds": times,
            "median_s": med, "ratio": round(ratio, 3), "target_met": ratio <= 1.1}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--legs", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=500.0)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    offline()
    sys.setrecursionlimit(10_000)
    load = os.getloadavg()
    chars = chars_part()
    print(f"3-leg LRU question, --rounds 3 --chair: stop {chars['stop']['rule']}, "
          f"{chars['requests']} requests, {chars['prompt_chars']:,} prompt characters "
          f"({chars['ratio_to_massgen']:.1%} of MassGen's {MASSGEN_CHARS:,}; target ≤ 10%: "
          f"{'MET' if chars['target_met'] else 'NOT MET'})")
    for key, e in chars["per_round"].items():
        print(f"  round {key}: {e['requests']} requests, {e['prompt_chars']:,} characters")
    wall = wall_part(args.legs, args.latency_ms, args.reps)
    print(f"{args.legs} legs x 3 rounds at {args.latency_ms:g} ms: deliberation "
          f"{wall['median_s']['deliberation']:.2f} s vs 3 sequential fanouts "
          f"{wall['median_s']['fanouts']:.2f} s = {wall['ratio']:.2f}x (target ≤ 1.1: "
          f"{'MET' if wall['target_met'] else 'NOT MET'})")
    write_result("deliberation", {"machine": machine(), "load_before": load,
                                  "load_after": os.getloadavg(), "chars": chars,
                                  "wall": wall})


if __name__ == "__main__":
    main()
