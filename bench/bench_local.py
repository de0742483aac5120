"""The local model server, old and new side by side in one run: llama.cpp's Python server
(``llama_cpp.server``, what orch ran before: one request at a time) against llama.cpp's own
``llama-server`` with parallel slots (what ``orch local build`` builds and orch runs now).

Run by hand (needs the local extra, ``orch local build``, and for the old server the
``bench-legacy`` extra)::

    python bench/bench_local.py [--tokens 64] [--reps 3] [--threads N]

Writes bench/results/local.json. Every request is the same raw-text completion of
``--tokens`` tokens (end-of-text banned through ``logit_bias``, so both servers generate
exactly that many), sent with urllib straight to the server:

- start, cold and warm: process start → the first 1-token completion answers. Cold: the GGUF
  and the server's binary evicted from the page cache first (``posix_fadvise DONTNEED``).
- tokens/s of 1 request; total tokens/s and wall time of 4 concurrent requests; wall time of
  the same 4 one after another.
- memory: PSS and peak RSS of one server (4 slots for the new one) after the 4 concurrent
  requests, against four servers (one slot each) answering one request each at the same time.
- the engine: a 4-leg wave through orch (managed server, hooks, ledger) against 4 one-leg
  waves one after another, on the new server.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from _common import machine, offline, write_result

PROMPT = "Once upon a time, in a lighthouse on a rocky island, there lived"
BANNED = {"1": -100, "106": -100}  # Gemma's <eos> and <end_of_turn>
ALIAS = "gemma3-270m"


def model_path() -> Path:
    from orchestrator.local.data import models_dir
    from orchestrator.local.model import BUILTIN_FILE, BUILTIN_SHA256, assemble_builtin, sha256_file

    path = models_dir() / BUILTIN_FILE
    if not path.is_file():
        assemble_builtin(path)
    assert sha256_file(path) == BUILTIN_SHA256
    return path


def free_port() -> int:
    from orchestrator.local.manager import free_port as pick

    return pick()


def old_argv(model: Path, port: int, threads: int, slots: int, home: Path) -> list[str]:
    cfg = home / f"old-{port}.json"
    cfg.write_text(json.dumps({"host": "127.0.0.1", "port": port, "models": [{
        "model": str(model), "model_alias": ALIAS, "n_ctx": 2048, "n_threads": threads,
        "n_threads_batch": threads, "logits_all": False, "verbose": False}]}))
    return [sys.executable, "-m", "llama_cpp.server", "--config_file", str(cfg)]


def new_argv(model: Path, port: int, threads: int, slots: int, home: Path) -> list[str]:
    from orchestrator.local import build
    from orchestrator.local import llama_server as llama

    return llama.argv(build.require(), model=model, alias=ALIAS, port=port, host="127.0.0.1",
                      slots=slots, n_ctx=2048, threads=threads, chat_format=None,
                      template_file=home / "unused.jinja", path=llama.FAST)


def complete(port: int, tokens: int, timeout: float = 600) -> int:
    body = json.dumps({"model": ALIAS, "prompt": PROMPT, "max_tokens": tokens,
                       "temperature": 0.8, "logit_bias": BANNED}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=timeout) as resp:
        return json.load(resp)["usage"]["completion_tokens"]


def evict(*paths: Path) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def start(argv: list[str], port: int) -> tuple[subprocess.Popen, float]:
    """Start a server; seconds until its first 1-token completion answers."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        try:
            complete(port, 1, timeout=5)
            return proc, time.perf_counter() - t0
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}: {argv}") from None
            time.sleep(0.05)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def concurrently(ports: list[int], tokens: int) -> tuple[int, float]:
    counts: list[int] = []
    threads = [threading.Thread(target=lambda p=p: counts.append(complete(p, tokens)))
               for p in ports]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts), time.perf_counter() - t0


def memory(pid: int) -> dict:
    status = Path(f"/proc/{pid}/status").read_text()
    hwm = int(next(ln for ln in status.splitlines() if ln.startswith("VmHWM")).split()[1])
    rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    pss = int(next(ln for ln in rollup.splitlines() if ln.startswith("Pss:")).split()[1])
    return {"peak_rss_mb": round(hwm / 1024, 1), "pss_mb": round(pss / 1024, 1)}


def bench_server(kind: str, make_argv, model: Path, binary: Path, threads: int, tokens: int,
                 reps: int, home: Path) -> dict:
    out: dict = {}
    cold, warm = [], []
    for _ in range(reps):
        evict(model, binary)
        port = free_port()
        proc, seconds = start(make_argv(model, port, threads, 4, home), port)
        cold.append(seconds)
        stop(proc)
        port = free_port()
        proc, seconds = start(make_argv(model, port, threads, 4, home), port)
        warm.append(seconds)
        stop(proc)
    out["start_cold_s"] = round(statistics.median(cold), 2)
    out["start_warm_s"] = round(statistics.median(warm), 2)
    port = free_port()
    proc, _ = start(make_argv(model, port, threads, 4, home), port)
    try:
        complete(port, 8)
        one, four, seq = [], [], []
        for _ in range(reps):
            n, wall = concurrently([port], tokens)
            one.append(n / wall)
            n, wall = concurrently([port] * 4, tokens)
            four.append((n / wall, wall))
            t0 = time.perf_counter()
            for _ in range(4):
                complete(port, tokens)
            seq.append(time.perf_counter() - t0)
        out["tok_s_1"] = round(statistics.median(one), 1)
        out["tok_s_4_total"] = round(statistics.median(r for r, _ in four), 1)
        out["ratio_4_vs_1"] = round(out["tok_s_4_total"] / out["tok_s_1"], 2)
        out["wall_4_concurrent_s"] = round(statistics.median(w for _, w in four), 2)
        out["wall_4_sequential_s"] = round(statistics.median(seq), 2)
        out["wall_ratio"] = round(out["wall_4_concurrent_s"] / out["wall_4_sequential_s"], 2)
        out["memory_one_server"] = memory(proc.pid)
    finally:
        stop(proc)
    ports = [free_port() for _ in range(4)]
    procs = []
    try:
        for p in ports:
            procs.append(start(make_argv(model, p, threads, 1, home), p)[0])
        concurrently(ports, tokens)
        each = [memory(p.pid) for p in procs]
    finally:
        for p in procs:
            stop(p)
    out["memory_four_servers"] = {
        "pss_mb_sum": round(sum(m["pss_mb"] for m in each), 1),
        "peak_rss_mb_sum": round(sum(m["peak_rss_mb"] for m in each), 1)}
    out["pss_saved_ratio"] = round(out["memory_four_servers"]["pss_mb_sum"]
                                   / out["memory_one_server"]["pss_mb"], 2)
    print(f"{kind}: {out}", flush=True)
    return out


def bench_engine(tokens: int, threads: int, reps: int) -> dict:
    """A 4-leg wave through orch against 4 one-leg waves in a row, on the managed server."""
    import anyio

    from orchestrator import runtime
    from orchestrator.cli.common import resolve_all
    from orchestrator.engine.ledger_sink import LedgerSink
    from orchestrator.engine.wave import Wave, WaveSpec
    from orchestrator.local import manager
    from orchestrator.local.settings import LocalSettings

    home = Path(tempfile.mkdtemp(prefix="orch-bench-local-"))
    os.environ["ORCH_HOME"] = str(home)
    os.environ["ORCH_PLUGINS"] = "local"
    (home / "config.json").write_text(json.dumps({"local": {
        "idle_minutes": 0, "max_tokens": tokens, "n_threads": threads, "max_slots": 4}}))
    runtime.config.cache_clear()
    cfg = runtime.config()
    pm = runtime.plugin_manager()

    def wave(n: int) -> float:
        spec = WaveSpec(models=resolve_all([f"local/{ALIAS}"] * n, cfg, pm),
                        briefing=PROMPT, runs_dir=home / "runs", timeout_s=1200)
        t0 = time.perf_counter()
        doc = anyio.run(Wave(spec, pm=pm, config=cfg, ledger=LedgerSink()).run)
        assert doc["status"] == "complete", [leg["reason"] for leg in doc["legs"]]
        return time.perf_counter() - t0

    manager.ensure(LocalSettings.from_config(cfg), slots=4)
    wave(1)  # warm-up
    four, seq = [], []
    for _ in range(reps):
        four.append(wave(4))
        seq.append(sum(wave(1) for _ in range(4)))
    manager.stop()
    return {"wave_4_legs_s": round(statistics.median(four), 2),
            "four_1_leg_waves_s": round(statistics.median(seq), 2),
            "ratio": round(statistics.median(four) / statistics.median(seq), 2),
            "note": "orch-plain stops at the first blank line: answers vary in length"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=64, help="output tokens per request")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None,
                        help="llama.cpp threads (default: orch's, half the cores)")
    parser.add_argument("--skip-old", action="store_true", help="no llama_cpp.server run")
    args = parser.parse_args()
    offline()
    from orchestrator.local import build
    from orchestrator.local.settings import default_threads
    from orchestrator.runtime import litellm

    litellm()
    threads = args.threads or default_threads()
    model = model_path()
    home = Path(tempfile.mkdtemp(prefix="orch-bench-servers-"))
    load_before = os.getloadavg()
    new = bench_server("new (llama-server)", new_argv, model, build.require(), threads,
                       args.tokens, args.reps, home)
    old = None
    if not args.skip_old:
        import llama_cpp

        lib = next(Path(llama_cpp.__file__).parent.glob("lib/libllama*"))
        old = bench_server("old (llama_cpp.server)", old_argv, model, lib, threads,
                           args.tokens, args.reps, home)
    engine = bench_engine(args.tokens, threads, args.reps)
    print(f"engine: {engine}")
    write_result("local", {
        "machine": machine(), "load_average_before": load_before,
        "load_average_after": os.getloadavg(), "tokens_per_request": args.tokens,
        "n_threads": threads, "new": new, "old": old, "engine": engine,
        "build": build.built()})


if __name__ == "__main__":
    main()
