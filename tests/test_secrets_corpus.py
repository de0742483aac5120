"""Zero false positives: identifiers that look like keys survive byte for byte.

A corpus of 200+ identifiers — model names containing ``sk-``, hostnames and provider ids with
``ak-``, hex commit ids, UUID paths — goes through ``orch provider add``, a wave (half of its
legs failing with a reason that names the model), ``--retry-failed`` and ``orch spend``, and
every one comes out exactly as it went in: in config.json, on the wire, in wave.json, in the
ledger and on stdout."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid

from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply


def _corpus() -> tuple[list[str], list[tuple[str, str]]]:
    models = []
    for i in range(40):  # short and long model names with an sk- run in them
        models.append(f"sk-mixtral-8x7b-instruct-v{i}")
    for i in range(30):
        digest = hashlib.sha1(f"m{i}".encode()).hexdigest()
        models.append(f"sk-proj-{digest[:24]}-chat")
    for i in range(40):  # fine-tunes named by commit
        models.append(hashlib.sha1(f"commit{i}".encode()).hexdigest())
    for i in range(40):  # checkpoints by UUID path
        models.append(f"ckpt/{uuid.UUID(int=i * 7919 + 1)}/final")
    hosts = []
    for i in range(25):
        hosts.append((f"ak-gw-{i:02d}", f"http://ak-gateway-{i:02d}.internal:8000/v1"))
    for i in range(25):
        hosts.append((f"ak-edge-{i:02d}",
                      f"https://ak-gateway-eu-west-{i:02d}-prod4.internal/openai/v1"))
    return models, hosts


def orch(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_key_looking_identifiers_survive_provider_add_a_wave_a_retry_and_spend(
        orch_home, scripted_server):
    models, hosts = _corpus()
    assert len(models) + 2 * len(hosts) >= 200
    srv = scripted_server
    assert orch("provider", "add", "sk-lab", "--base-url", srv.url).exit_code == 0
    for pid, url in hosts:
        result = orch("provider", "add", pid, "--base-url", url)
        assert result.exit_code == 0, result.output
    config = json.loads((orch_home / "config.json").read_text())
    for pid, url in hosts:
        assert config["providers"][pid]["base_url"] == url  # stored byte for byte
    listed = orch("provider", "list").stdout
    assert all(url in listed for _, url in hosts)

    failing = set(models[::2])
    for name in models:
        if name in failing:
            srv.script(name, Reply(status=404, error_message=f"The model {name} does not "
                                   "exist or you do not have access to it."))
        else:
            srv.script(name, Reply(text=f"I am {name}."))
    names = [f"sk-lab/{m}" for m in models] + [f"{pid}/m" for pid, _ in hosts[:10]]
    wave = orch("fanout", "-m", ",".join(names), "-p", "Who are you?", "--max-legs", "256",
                "--tools", "none", "--tag", "ak-release-2024-11-30-build-9f8e7d")
    assert wave.exit_code == 2, wave.output
    doc = json.loads(next((orch_home / "runs").glob("*/wave.json")).read_text())
    assert [leg["model"] for leg in doc["legs"]] == names
    for leg, name in zip(doc["legs"], names, strict=True):
        model = name.split("/", 1)[1]
        assert f"== {name} (" in wave.stdout
        if model in failing:
            assert leg["reason"].endswith(f"The model {model} does not exist or you do not "
                                          "have access to it.")
        elif name.startswith("sk-lab/"):
            assert leg["answer"] == f"I am {model}." and f"I am {model}." in wave.stdout
    assert {r.model for r in srv.chats} == set(models)  # not the launch's GET /models

    before = len(srv.chats)
    retry = orch("fanout", "--retry-failed", doc["wave_id"], "--max-legs", "256", "--json")
    assert retry.stdout.startswith("{"), retry.output
    retried = json.loads(retry.stdout)
    expected = [f"sk-lab/{m}" for m in models if m in failing] + \
        [f"{pid}/m" for pid, _ in hosts[:10]]
    assert [leg["model"] for leg in retried["legs"]] == expected
    assert sorted(r.model for r in srv.chats[before:]) == sorted(failing)

    rows = sqlite3.connect(orch_home / "ledger.db").execute(
        "select model, provider, tag from spend").fetchall()
    assert {r[0] for r in rows} == set(names)
    assert {r[1] for r in rows} == {"sk-lab", *(pid for pid, _ in hosts[:10])}
    assert {r[2] for r in rows} == {"ak-release-2024-11-30-build-9f8e7d"}
    spend = orch("spend", "--group-by", "model", "--since", "all", "--json")
    assert spend.exit_code == 0, spend.output
    assert set(names) <= set(spend.stdout and _keys(json.loads(spend.stdout)))
    human = orch("spend", "--group-by", "model", "--since", "all").stdout
    assert all(name in human for name in names)


def _keys(doc) -> set[str]:
    rows = doc.get("groups") or doc.get("rows") or []
    return {r.get("key") or r.get("model") for r in rows}
