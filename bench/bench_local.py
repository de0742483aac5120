"""The local model server: start time, tokens/s with 1 and 4 concurrent legs, memory of one
shared server against one server per leg.

Run by hand: ``/work/venv/bin/python bench/bench_local.py [--tokens 96] [--reps 3]``
(needs the local extra). Everything happens in a temporary ORCH_HOME; writes
bench/results/local.json.

- start (warm: the GGUF already assembled and in the page cache): ``manager.ensure`` from
  nothing to a server answering ``/v1/models`` — sha256 check, supervisor, llama.cpp load —
  against the bare server process started by hand with the same config file (the baseline).
- tokens/s: a wave through the real engine (Wave, one shared Server, hooks, ledger) of 1 and
  of 4 legs on the one server, against the same requests sent straight to the server with
  urllib (the baseline). To make every request generate exactly ``--tokens`` tokens the
  built-in alias is served with the ``chatml`` chat format here (a stop string the base model
  never writes); orch's default ``orch-plain`` format stops at the first blank line.
- memory: peak RSS (VmHWM) and PSS of the one shared server after the 4-leg wave, against
  four servers, one per leg, each answering one request at the same time. PSS splits the
  pages processes share (the mmap'd GGUF) between them, so it is the honest total.
- threads: decode tokens/s of one request with n_threads 1 and 2 (the default is half the
  cores: llama.cpp's threads spin while waiting for each other, so oversubscribing hurts).
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

BRIEF = "Write a long story about a lighthouse keeper and the sea."


def setup_home(tokens: int, threads: int) -> Path:
    home = Path(tempfile.mkdtemp(prefix="orch-bench-local-"))
    os.environ["ORCH_HOME"] = str(home)
    os.environ["ORCH_PLUGINS"] = "local"  # the engine sends exactly what the baseline sends
    for key in [k for k in os.environ if k.endswith("_API_KEY")]:
        del os.environ[key]
    from orchestrator.local.model import BUILTIN_FILE, BUILTIN_SHA256, assemble_builtin

    target = home / "local" / "models" / BUILTIN_FILE
    t0 = time.perf_counter()
    assemble_builtin(target)
    assemble_s = time.perf_counter() - t0
    write_config(home, tokens, threads, target, BUILTIN_SHA256)
    print(f"assembled the model in {assemble_s:.2f} s")
    return home


def write_config(home: Path, tokens: int, threads: int, target: Path, sha: str) -> None:
    from orchestrator import runtime

    (home / "config.json").write_text(json.dumps({"local": {
        "idle_minutes": 0, "max_tokens": tokens, "n_threads": threads,
        "models": {"gemma3-270m": {"path": str(target), "sha256": sha,
                                   "chat_format": "chatml"}}}}))
    runtime.config.cache_clear()


def settings():
    from orchestrator.local.settings import LocalSettings
    from orchestrator.runtime import config

    return LocalSettings.from_config(config())


def ask(url: str, tokens: int) -> int:
    body = json.dumps({"model": "gemma3-270m", "max_tokens": tokens,
                       "messages": [{"role": "user", "content": BRIEF}]}).encode()
    req = urllib.request.Request(f"{url}/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.load(resp)["usage"]["completion_tokens"]


def direct(url: str, n: int, tokens: int) -> float:
    """n concurrent requests straight to the server: output tokens per wall second."""
    counts: list[int] = []
    threads = [threading.Thread(target=lambda: counts.append(ask(url, tokens)))
               for _ in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - t0)


def engine(n: int) -> float:
    """A wave of n legs through orch's engine: output tokens per wall second."""
    import anyio

    from orchestrator import runtime
    from orchestrator.cli.common import resolve_all
    from orchestrator.engine.ledger_sink import LedgerSink
    from orchestrator.engine.wave import Wave, WaveSpec
    from orchestrator.plugins import load

    cfg = runtime.config()
    pm = load(cfg.section("plugins"))
    spec = WaveSpec(models=resolve_all(["local/gemma3-270m"] * n, cfg, pm), briefing=BRIEF,
                    runs_dir=Path(os.environ["ORCH_HOME"]) / "runs", timeout_s=1200)
    wave = Wave(spec, pm=pm, config=cfg, ledger=LedgerSink())
    t0 = time.perf_counter()
    doc = anyio.run(wave.run)
    wall = time.perf_counter() - t0
    assert doc["status"] == "complete", [leg["reason"] for leg in doc["legs"]]
    return doc["usage"]["output_tokens"] / wall


def memory(pid: int) -> dict:
    """Peak RSS and current PSS of a process, in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    hwm = int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1])
    rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    pss = int(next(line for line in rollup.splitlines() if line.startswith("Pss:")).split()[1])
    return {"peak_rss_mb": round(hwm / 1024, 1), "pss_mb": round(pss / 1024, 1)}


def bare_server(config_file: Path, port: int) -> subprocess.Popen:
    cfg = json.loads(config_file.read_text())
    cfg["port"] = port
    own = config_file.with_name(f"bare-{port}.json")
    own.write_text(json.dumps(cfg))
    return subprocess.Popen([sys.executable, "-m", "orchestrator.local.llama_server",
                             "--config_file", str(own)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def wait_up(port: int, timeout: float = 300) -> None:
    from orchestrator.local.state import probe

    deadline = time.monotonic() + timeout
    while probe("127.0.0.1", port, 1.0)[0] != "ok":
        if time.monotonic() > deadline:
            raise RuntimeError(f"bare server on {port} did not come up")
        time.sleep(0.02)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def bench_start(reps: int) -> dict:
    from orchestrator.local import manager
    from orchestrator.local.state import local_dir

    managed, bare = [], []
    for _ in range(reps):  # alternate, so background load hits both alike
        t0 = time.perf_counter()
        state, started = manager.ensure(settings())
        managed.append(time.perf_counter() - t0)
        assert started
        manager.stop()
        port = manager.free_port()
        t0 = time.perf_counter()
        proc = bare_server(local_dir() / "llama-server.json", port)
        wait_up(port)
        bare.append(time.perf_counter() - t0)
        stop(proc)
    return {"managed_s": round(statistics.median(managed), 3),
            "bare_s": round(statistics.median(bare), 3),
            "ratio": round(statistics.median(managed) / statistics.median(bare), 2),
            "runs_managed": [round(x, 3) for x in managed],
            "runs_bare": [round(x, 3) for x in bare]}


def bench_throughput(tokens: int, reps: int) -> tuple[dict, dict]:
    from orchestrator.local import manager
    from orchestrator.local.state import read_state

    state, _ = manager.ensure(settings())
    url = state["url"]
    ask(url, 8)  # warm-up: first request pays the prompt cache
    out = {}
    for n in (1, 4):
        eng, raw = [], []
        for _ in range(reps):
            eng.append(engine(n))
            raw.append(direct(url, n, tokens))
        out[f"{n}_legs"] = {"engine_tok_s": round(statistics.median(eng), 1),
                            "direct_tok_s": round(statistics.median(raw), 1),
                            "ratio": round(statistics.median(eng) / statistics.median(raw), 3)}
        print(f"{n} legs: {out[f'{n}_legs']}")
    shared = memory(read_state()["server_pid"])
    manager.stop()
    return out, shared


def bench_per_leg_servers(tokens: int) -> dict:
    from orchestrator.local import manager
    from orchestrator.local.state import local_dir

    ports = [manager.free_port() for _ in range(4)]
    procs = [bare_server(local_dir() / "llama-server.json", p) for p in ports]
    try:
        for port in ports:
            wait_up(port)
        threads = [threading.Thread(target=ask, args=(f"http://127.0.0.1:{p}/v1", tokens))
                   for p in ports]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        each = [memory(p.pid) for p in procs]
    finally:
        for p in procs:
            stop(p)
    return {"servers": 4, "peak_rss_mb_sum": round(sum(m["peak_rss_mb"] for m in each), 1),
            "pss_mb_sum": round(sum(m["pss_mb"] for m in each), 1), "each": each}


def bench_threads(home: Path, tokens: int) -> dict:
    from orchestrator.local import manager
    from orchestrator.local.model import BUILTIN_FILE, BUILTIN_SHA256

    out = {}
    for n in (1, 2):
        write_config(home, tokens, n, home / "local" / "models" / BUILTIN_FILE, BUILTIN_SHA256)
        state, _ = manager.ensure(settings())
        ask(state["url"], 8)
        out[f"n_threads_{n}_tok_s"] = round(direct(state["url"], 1, tokens), 1)
        manager.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=96, help="output tokens per request")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None,
                        help="n_threads for the main figures (default: orch's default)")
    args = parser.parse_args()
    offline()
    from orchestrator.local.settings import default_threads
    from orchestrator.runtime import litellm

    litellm()
    threads = args.threads or default_threads()
    home = setup_home(args.tokens, threads)
    load_before = os.getloadavg()
    start = bench_start(args.reps)
    print(f"start: {start}")
    throughput, shared = bench_throughput(args.tokens, args.reps)
    per_leg = bench_per_leg_servers(args.tokens)
    mem = {"shared_1_server": shared, "one_per_leg_4_servers": per_leg,
           "pss_ratio": round(per_leg["pss_mb_sum"] / shared["pss_mb"], 2),
           "peak_rss_ratio": round(per_leg["peak_rss_mb_sum"] / shared["peak_rss_mb"], 2)}
    print(f"memory: {mem}")
    thread_figures = bench_threads(home, args.tokens)
    print(f"threads: {thread_figures}")
    write_result("local", {
        "machine": machine(), "load_average_before": load_before,
        "load_average_after": os.getloadavg(), "tokens_per_request": args.tokens,
        "n_threads": threads, "start": start, "throughput": throughput, "memory": mem,
        "threads": thread_figures})


if __name__ == "__main__":
    main()
