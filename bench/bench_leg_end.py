"""What durable leg ends cost the leg loop: this tree against a baseline ref, in one run.

Run by hand: ``.venv/bin/python bench/bench_leg_end.py [--baseline main] [--pairs 3]``.

The baseline's ``orchestrator`` and ``plugins`` are exported with ``git archive`` into a
temporary directory and put first on ``PYTHONPATH``; the same benchmark
(``bench_leg_overhead.py``: engine waves against a bare litellm loop, zero-latency scripted
server) then runs in a child process for the baseline and for this tree, alternating, for
``--pairs`` pairs. The shapes stress leg ends: ``20x10`` is twenty one-leg waves of 10
requests (a ledger row, metadata.json, the conversation closed, wave.json twice per 10
requests); ``1x50`` is the loop itself. The figure is the median engine time per request,
this tree / baseline, each normalised by its own run's bare loop (load on a shared machine
moves both sides of one run together). Target: at most 1.05. Writes
bench/results/leg_end.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import machine, write_result

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TARGET = 1.05
SHAPES = "20x10,1x50"


def export(ref: str, into: Path) -> Path:
    """The baseline's packages at ``into``, importable as orchestrator and orch_plugins."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "orchestrator",
                              "plugins"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    (into / "orch_plugins").symlink_to(into / "plugins")
    return into


def one_run(pythonpath: str | None, reps: int) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    else:
        env.pop("PYTHONPATH", None)
    subprocess.run([sys.executable, str(HERE / "bench_leg_overhead.py"), "--shapes", SHAPES,
                    "--reps", str(reps)], env=env, check=True, capture_output=True, text=True)
    return json.loads((HERE / "results" / "leg_overhead.json").read_text())["results"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="main", help="git ref to compare against")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="orch-baseline-") as tmp:
        base = str(export(args.baseline, Path(tmp)))
        runs: dict[str, list[dict]] = {"baseline": [], "this": []}
        for pair in range(args.pairs):
            order = ["baseline", "this"] if pair % 2 == 0 else ["this", "baseline"]
            for side in order:
                result = one_run(base if side == "baseline" else None, args.reps)
                runs[side].append(result)
                print(f"pair {pair + 1} {side}: " + ", ".join(
                    f"{shape} engine {r['median']['engine']['wall_ms']:.2f} ms/req "
                    f"(x{r['ratio_wall']:.3f} of bare)" for shape, r in result.items()),
                    flush=True)
    summary = {}
    for shape in SHAPES.split(","):
        normalised = {side: statistics.median(r[shape]["ratio_wall"] for r in xs)
                      for side, xs in runs.items()}
        raw = {side: statistics.median(r[shape]["median"]["engine"]["wall_ms"] for r in xs)
               for side, xs in runs.items()}
        summary[shape] = {
            "engine_over_bare": normalised, "engine_ms_per_request": raw,
            "ratio": normalised["this"] / normalised["baseline"],
            "raw_ratio": raw["this"] / raw["baseline"],
        }
        s = summary[shape]
        verdict = "meets" if s["ratio"] <= TARGET else "MISSES"
        print(f"{shape}: this/baseline {s['ratio']:.3f} (normalised by bare), raw "
              f"{s['raw_ratio']:.3f}; {verdict} the {TARGET} target")
    write_result("leg_end", {"machine": machine(), "baseline": args.baseline,
                             "pairs": args.pairs, "reps": args.reps, "summary": summary,
                             "runs": runs,
                             "meets_target": all(s["ratio"] <= TARGET
                                                 for s in summary.values())})


if __name__ == "__main__":
    main()
