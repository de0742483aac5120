"""orch behind a real LiteLLM proxy (docs/team.md), itself in front of the scripted server.

One proxy for the session (it starts slowly), run from examples/team/proxy.yaml exactly as the
recipe says, offline and without a database; the users' keys come from examples/team/
team_keys.py. orch reaches it as `orch provider add team --base-url ... --api-key-env
ORCH_TEAM_KEY`; every run goes through the real `orch` entry point in a subprocess.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from orchestrator.testing.litellm_proxy import LiteLLMProxy, missing_modules
from orchestrator.testing.scripted_server import Reply, ScriptedServer

TEAM = Path(__file__).resolve().parents[1] / "examples" / "team"
USAGE = {"prompt_tokens": 1000, "completion_tokens": 500}  # priced by the proxy as gpt-4o
ORCH = [sys.executable, "-m", "orchestrator"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(bool(missing_modules()), reason=(
        "the gateway extra is not installed (pip install -e '.[gateway]'): missing "
        f"{', '.join(missing_modules())} (mcp comes from orch's `mcp` extra)")),
]


class Gateway:
    def __init__(self, proxy: LiteLLMProxy, upstream: ScriptedServer, keys: dict[str, str],
                 master: str, upstream_key: str):
        self.proxy, self.upstream, self.keys = proxy, upstream, keys
        self.master, self.upstream_key = master, upstream_key

    def post(self, key: str, model: str) -> tuple[int, dict[str, str], dict]:
        """One chat completion straight to the proxy: status, headers, body."""
        request = urllib.request.Request(
            f"{self.proxy.url}/chat/completions", method="POST",
            data=json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}]})
            .encode(), headers={"Authorization": f"Bearer {key}",
                                "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.status, dict(answer.headers), json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), json.loads(exc.read() or b"{}")


@pytest.fixture(scope="session")
def gateway(tmp_path_factory):
    home = tmp_path_factory.mktemp("gateway")
    for name in ("proxy.yaml", "team_keys.py"):
        shutil.copy(TEAM / name, home / name)
    keys = {user: f"sk-{user}-{secrets.token_hex(16)}" for user in ("alice", "bob", "carol")}
    grants = {keys["alice"]: {"user_id": "alice"},
              keys["bob"]: {"user_id": "bob", "models": ["deep"]},
              keys["carol"]: {"user_id": "carol", "model_max_budget": {
                  "deep": {"budget_limit": 1e-6, "time_period": "1d"}}}}
    keys_file = home / "keys.json"
    keys_file.write_text(json.dumps(grants))
    keys_file.chmod(0o600)
    master, upstream_key = f"sk-master-{secrets.token_hex(16)}", f"sk-up-{secrets.token_hex(16)}"
    with ScriptedServer() as upstream:
        upstream.script("gpt-4o", Reply(text="reviewed", usage=USAGE))
        upstream.script("gpt-4o-mini", Reply(text="quick", usage=USAGE))
        env = {"UPSTREAM_API_BASE": upstream.url, "UPSTREAM_API_KEY": upstream_key,
               "LITELLM_MASTER_KEY": master, "TEAM_KEYS_FILE": str(keys_file)}
        with LiteLLMProxy(home / "proxy.yaml", env=env) as proxy:
            yield Gateway(proxy, upstream, keys, master, upstream_key)


@pytest.fixture
def team(gateway, orch_home):
    """This test's ORCH_HOME with the gateway declared as provider `team`, the recipe's way
    (`orch provider add`, in this process: it writes config.json and sends nothing; each
    test's runs go through the real `orch` in a subprocess)."""
    from click.testing import CliRunner

    from orchestrator.cli import cli

    run = CliRunner().invoke(cli, ["provider", "add", "team", "--base-url", gateway.proxy.url,
                                   "--api-key-env", "ORCH_TEAM_KEY"])
    assert run.exit_code == 0, run.output
    return gateway


def _orch(args: list[str], key: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ORCH_TEAM_KEY": key, "NO_COLOR": "1"}
    env.pop("LITELLM_MASTER_KEY", None)
    return subprocess.run([*ORCH, *args], env=env, capture_output=True, text=True, timeout=500)


def _fanout(models: list[str], key: str, *extra: str) -> tuple[subprocess.CompletedProcess,
                                                              dict]:
    run = _orch(["fanout", "--models", ",".join(models), "--prompt", "Review this.",
                 "--json", *extra], key=key)
    return run, json.loads(run.stdout) if run.stdout.strip().startswith("{") else {}


def _ledger(home: Path) -> list[dict]:
    with sqlite3.connect(home / "ledger.db") as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM spend ORDER BY id")]


def test_a_16_leg_wave_through_the_gateway_records_the_proxys_own_costs(team, orch_home):
    status, headers, _ = team.post(team.keys["alice"], "deep")
    assert status == 200
    charged = float(headers["x-litellm-response-cost"])  # what the proxy charges per answer
    assert charged > 0
    before = team.upstream.count("gpt-4o")
    run, doc = _fanout(["team/deep"] * 16, team.keys["alice"], "--max-legs", "16")
    assert run.returncode == 0, run.stderr
    assert [leg["status"] for leg in doc["legs"]] == ["complete"] * 16
    assert team.upstream.count("gpt-4o") - before == 16  # every leg reached the provider once
    rows = _ledger(orch_home)
    assert len(rows) == 16
    assert {r["cost_source"] for r in rows} == {"reported"}
    assert all(r["cost_usd"] == pytest.approx(charged, rel=1e-9) for r in rows)
    assert all(r["input_tokens"] == 1000 and r["output_tokens"] == 500 for r in rows)
    assert doc["cost_usd"] == pytest.approx(16 * charged, rel=1e-6)


def test_an_rpm_limit_of_4_answers_429_and_the_gate_rides_it_out(team, orch_home):
    """The proxy counts a request per clock minute; a burst of 6 at once overshoots its count
    (litellm 1.110.2, in memory), so this user's gate starts at 2 in flight (config)."""
    import time

    config = orch_home / "config.json"
    doc = json.loads(config.read_text())
    doc["providers"]["team"]["max_concurrent"] = 2
    config.write_text(json.dumps(doc))
    if time.time() % 60 > 40:  # the proxy counts per clock minute: orch starts in seconds,
        time.sleep(61 - time.time() % 60)  # so its 6 requests all fall in one minute
    before = team.upstream.count("gpt-4o-mini")
    run, doc = _fanout(["team/fast"] * 6, team.keys["alice"])
    assert run.returncode == 0, run.stderr
    assert [leg["status"] for leg in doc["legs"]] == ["complete"] * 6
    assert team.upstream.count("gpt-4o-mini") - before == 6  # the 429s never reached it
    sent = sum(leg["requests"] for leg in doc["legs"])
    assert sent > 6  # some legs were refused at least once, and retried
    held = doc["server"]["rate_gate"][team.proxy.url]
    assert held["retries"] == sent - 6
    assert held["held_s"] >= 60  # the proxy's llm_provider-retry-after, not a guess
    assert held["lowest_limit"] < held["ceiling"]  # the gate halved on the proxy's 429
    assert "rate_limit_hold" in run.stderr and team.proxy.url in run.stderr  # said as it held


def test_a_model_the_key_may_not_use_is_named_and_not_retried(team, orch_home):
    before = team.upstream.count("gpt-4o-mini")
    # the proxy lists bob's key only deep: refused at launch, the key's variable named
    run, doc = _fanout(["team/fast"], team.keys["bob"])  # bob's key allows only deep
    assert run.returncode == 2 and doc == {}, run.stderr
    assert ("team/fast is not among the 1 models team lists for the key in $ORCH_TEAM_KEY "
            "(live)") in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
    assert team.keys["bob"] not in run.stderr
    assert team.upstream.count("gpt-4o-mini") == before
    assert not (orch_home / "ledger.db").exists()  # nothing sent, nothing billed
    # sent anyway: the proxy's refusal is named, not retried, billed nothing
    run, doc = _fanout(["team/fast"], team.keys["bob"], "--no-validate-models")
    assert run.returncode == 1
    leg = doc["legs"][0]
    assert leg["status"] == "error" and leg["reason"].startswith("model_not_allowed: ")
    assert "'fast' is not available for this API key" in leg["reason"]
    assert leg["requests"] == 1  # orch sent it once
    assert team.upstream.count("gpt-4o-mini") == before  # the proxy forwarded nothing
    row = _ledger(orch_home)[0]
    assert row["status"] == "error" and row["reason"].startswith("model_not_allowed: ")
    assert row["cost_source"] == "none"
    run, doc = _fanout(["team/nosuch"], team.keys["alice"])  # a name the gateway routes not
    assert run.returncode == 2 and "team/nosuch is not among the 2 models team" in run.stderr
    run, doc = _fanout(["team/nosuch"], team.keys["alice"], "--no-validate-models")
    leg = doc["legs"][0]
    assert leg["reason"].startswith("bad_request: ") and "Invalid model name" in leg["reason"]
    assert leg["requests"] == 1


def test_a_spent_budget_is_named_and_not_retried(team, orch_home):
    # carol's budget for deep is $0.000001: one answer spends it (the proxy counts after it).
    status, _, body = team.post(team.keys["carol"], "deep")
    for _ in range(60):
        status, _, body = team.post(team.keys["carol"], "deep")
        if status != 200:
            break
    assert status == 422 and body["error"]["type"] == "budget_exceeded"
    before = team.upstream.count("gpt-4o")
    run, doc = _fanout(["team/deep"], team.keys["carol"])
    assert run.returncode == 1
    leg = doc["legs"][0]
    assert leg["status"] == "error" and leg["reason"].startswith("budget_exceeded: ")
    assert "exceeded budget for model=deep" in leg["reason"]
    assert leg["requests"] == 1  # not retried, by the gate or by litellm
    assert team.upstream.count("gpt-4o") == before


def test_no_key_reaches_output_artifacts_or_ledger(team, orch_home):
    """The user's virtual key, and the master key when an admin runs orch with it."""
    outputs = []
    for key, models in ((team.keys["alice"], ["team/deep"] * 2), (team.master, ["team/deep"]),
                        (team.keys["bob"], ["team/deep", "team/fast"])):
        run, _ = _fanout(models, key, "--chair", "team/deep")
        outputs += [run.stdout, run.stderr]
    written = [p.read_bytes().decode("utf-8", "replace") for p in orch_home.rglob("*")
               if p.is_file()]
    ledger = json.dumps(_ledger(orch_home))
    for secret in (*team.keys.values(), team.master, team.upstream_key):
        assert not any(secret in text for text in [*outputs, *written, ledger])
    assert any("model_not_allowed" in text for text in outputs)  # bob's run did report
