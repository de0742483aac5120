"""The token estimator's error by content kind, against litellm's own counter.

Run by hand: ``.venv/bin/python bench/bench_estimate.py``. The corpus is built at run time
from files the pinned environment already has (CPython's licence text and stdlib modules,
litellm's model-price JSON, numpy's test CSVs, this project's docs) plus generated CSV and
chat-message JSON, cut into 6 KB samples: prose, code, JSON, CSV. For each sample it compares
characters/4 and the format-aware count (orchestrator.models.estimate.heuristic_tokens) with
``litellm.token_counter`` (tiktoken cl100k_base, what the estimator itself uses when it can),
and times each. Writes bench/results/estimate.json.
"""

from __future__ import annotations

import argparse
import csv
import glob
import io
import json
import os
import random
import statistics
import sys
import sysconfig
import time
from pathlib import Path

from _common import machine, offline, write_result

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_CHARS = 6000


def chunks(text: str, n: int) -> list[str]:
    out = [text[i:i + SAMPLE_CHARS] for i in range(0, len(text), SAMPLE_CHARS)]
    return [c for c in out if len(c) > SAMPLE_CHARS // 2][:n]


def corpus() -> dict[str, list[tuple[str, str]]]:
    """{kind: [(source, sample), ...]}, deterministic for a pinned environment."""
    import litellm

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    site = Path(sysconfig.get_paths()["purelib"])
    kinds: dict[str, list[tuple[str, str]]] = {k: [] for k in ("prose", "code", "json", "csv")}

    def add(kind: str, source: str, text: str, n: int) -> None:
        kinds[kind] += [(source, c) for c in chunks(text, n)]

    licence = stdlib / "LICENSE.txt"
    if licence.exists():
        add("prose", "CPython LICENSE.txt", licence.read_text(encoding="utf-8"), 2)
    for path in sorted(glob.glob(str(site / "structlog-*.dist-info/licenses/LICENSE-APACHE"))):
        add("prose", "Apache-2.0 licence text", Path(path).read_text(encoding="utf-8"), 2)
    for name in ("spend.md", "configuration.md"):
        doc = ROOT / "docs" / name
        if doc.exists():
            add("prose", f"docs/{name}", doc.read_text(encoding="utf-8"), 2)
    for name in ("textwrap.py", "argparse.py", "json/decoder.py", "asyncio/locks.py"):
        add("code", f"stdlib {name}", (stdlib / name).read_text(encoding="utf-8"), 2)
    for name in ("orchestrator/engine/leg.py", "orchestrator/models/server.py"):
        add("code", name, (ROOT / name).read_text(encoding="utf-8"), 2)

    prices = json.loads((Path(litellm.__file__).parent /
                         "model_prices_and_context_window_backup.json").read_text())
    keys = sorted(k for k, v in prices.items() if isinstance(v, dict))
    add("json", "litellm prices, indented", json.dumps({k: prices[k] for k in keys[:150]},
                                                       indent=4), 3)
    add("json", "litellm prices, compact", json.dumps({k: prices[k] for k in keys[150:300]}), 3)
    rnd = random.Random(11)
    chat = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i:04d}", "type": "function", "function": {
            "name": rnd.choice(["read", "grep", "glob"]),
            "arguments": json.dumps({"path": f"src/mod_{rnd.randint(1, 300)}.py",
                                     "offset": rnd.randint(0, 900), "limit": 80})}}]}
        for i in range(120)]
    add("json", "tool-call messages", json.dumps(chat), 2)

    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["model", "provider", "mode", "max_input", "max_output", "in_cost",
                     "out_cost"])
    for k in keys:
        v = prices[k]
        writer.writerow([k, v.get("litellm_provider"), v.get("mode"), v.get("max_input_tokens"),
                         v.get("max_output_tokens"), v.get("input_cost_per_token"),
                         v.get("output_cost_per_token")])
    add("csv", "litellm prices as CSV", buf.getvalue(), 3)
    for path in sorted(glob.glob(str(site / "numpy/random/tests/data/pcg64-testset-1.csv"))):
        add("csv", "numpy pcg64 test vectors", Path(path).read_text(), 2)
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["ts", "user_id", "event", "latency_ms", "ok"])
    for i in range(3000):
        writer.writerow([f"2025-03-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:{i * 7 % 60:02d}Z",
                         rnd.randint(10000, 99999), rnd.choice(["login", "view", "purchase"]),
                         round(rnd.random() * 500, 2), rnd.choice(["true", "false"])])
    add("csv", "generated event log", buf.getvalue(), 3)
    return kinds


def per_second(fn, texts: list[str], repeat: int) -> float:
    """Characters per second (best of ``repeat``)."""
    chars = sum(len(t) for t in texts)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for t in texts:
            fn(t)
        best = min(best, time.perf_counter() - t0)
    return chars / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    offline()
    sys.path.insert(0, str(ROOT))
    from orchestrator.models import estimate
    from orchestrator.runtime import litellm

    lm = litellm()
    reference = lambda text: lm.token_counter(text=text)  # noqa: E731 - tiktoken cl100k_base
    data = corpus()
    rows, results = [], {}
    print(f"{'kind':<6} {'n':>3} {'tokens':>7} {'chars/4 err':>12} {'format-aware err':>17} "
          f"{'kind ok':>8} {'calib':>6}")
    for kind, samples in data.items():
        flat_err, fa_err, calib, recognised, total = [], [], [], 0, 0
        for source, text in samples:
            ref = reference(text)
            total += ref
            flat = estimate.flat_tokens(text)
            fa = estimate.heuristic_tokens(text)  # as the estimator runs: kind detected
            flat_err.append((flat - ref) / ref)
            fa_err.append((fa - ref) / ref)
            calib.append(ref / (estimate.heuristic_tokens(text, kind)
                                / estimate.PIECE_FACTOR[kind]))
            recognised += estimate.kind_of(text) == kind
            rows.append({"kind": kind, "source": source, "chars": len(text), "tokens": ref,
                         "flat": flat, "format_aware": fa})
        results[kind] = {
            "samples": len(samples), "tokens": total,
            "chars_per_token": round(sum(len(t) for _, t in samples) / total, 2),
            "flat_mean_abs_err": round(statistics.mean(abs(e) for e in flat_err), 3),
            "flat_worst_err": round(max(flat_err, key=abs), 3),
            "format_aware_mean_abs_err": round(statistics.mean(abs(e) for e in fa_err), 3),
            "format_aware_worst_err": round(max(fa_err, key=abs), 3),
            "kind_recognised": f"{recognised}/{len(samples)}",
            "calibration": round(statistics.mean(calib), 3),
        }
        r = results[kind]
        print(f"{kind:<6} {len(samples):>3} {total:>7} "
              f"{r['flat_mean_abs_err']:>6.1%} ({r['flat_worst_err']:+.0%}) "
              f"{r['format_aware_mean_abs_err']:>9.1%} ({r['format_aware_worst_err']:+.0%}) "
              f"{r['kind_recognised']:>8} {r['calibration']:>6.3f}")

    texts = [t for samples in data.values() for _, t in samples]
    speed = {
        "chars/4": per_second(estimate.flat_tokens, texts, args.repeat),
        "format-aware": per_second(estimate.heuristic_tokens, texts, args.repeat),
        "litellm counter": per_second(reference, texts, args.repeat),
    }
    estimate._count.cache_clear()
    estimate.estimate_text(texts[0])  # load the tokenizer outside the timing
    estimate._count.cache_clear()
    speed["estimate_text (cold cache)"] = per_second(
        lambda t: (estimate._count.cache_clear(), estimate.estimate_text(t)), texts, args.repeat)
    speed["estimate_text (cached)"] = per_second(estimate.estimate_text, texts, args.repeat)
    base = speed["litellm counter"]
    print(f"\n{'method':<28} {'MB/s':>8} {'vs litellm counter':>19}")
    for name, cps in speed.items():
        print(f"{name:<28} {cps / 1e6:>8.2f} {cps / base:>18.2f}x")
    write_result("estimate", {"machine": machine(), "reference": "litellm.token_counter "
                              "(tiktoken cl100k_base)", "by_kind": results,
                              "chars_per_second": {k: round(v) for k, v in speed.items()},
                              "samples": rows, "python": sys.version.split()[0],
                              "pid": os.getpid()})


if __name__ == "__main__":
    main()
