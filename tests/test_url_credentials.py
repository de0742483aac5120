"""A hand-edited base URL with credentials (``user:pass@``, ``?api_key=``): masked in every
output, and ``orch doctor`` says what to do instead of misreporting the endpoint. A run that
reaches the provider is a real `orch` process (what litellm or anything else writes to its
streams counts); the commands that print what orch knows run in this process."""

from __future__ import annotations

import json

import pytest

from orchestrator.testing.daemon import client, invoke

PASSWORD = "hunter2-PASSWORD-0042"
QUERY_KEY = "qk-0123456789abcdefghij"


@pytest.fixture
def hand_edited(orch_home, scripted_server):
    host = scripted_server.url.split("://", 1)[1]
    (orch_home / "config.json").write_text(json.dumps({"providers": {
        "bob": {"base_url": f"http://bob:{PASSWORD}@{host}"},
        "qq": {"base_url": f"{scripted_server.url}?api_key={QUERY_KEY}&region=eu"},
    }}))
    return orch_home


def nowhere(home, *results) -> None:
    for result in results:
        assert PASSWORD not in result.output and QUERY_KEY not in result.output, result.output
        assert "Traceback" not in result.output
    for path in home.rglob("*"):
        if path.is_file() and path.name != "config.json":  # the user's own file
            data = path.read_bytes()
            assert PASSWORD.encode() not in data and QUERY_KEY.encode() not in data, path


def test_provider_list_masks_them(hand_edited):
    text, as_json = invoke(["provider", "list"]), invoke(["provider", "list", "--json"])
    assert text.exit_code == 0 and as_json.exit_code == 0, text.output
    assert "http://***@127.0.0.1" in text.stdout and "api_key=***&region=eu" in text.stdout
    urls = {p["id"]: p["base_url"] for p in json.loads(as_json.stdout)}
    assert urls["bob"].startswith("http://***@127.0.0.1") and "region=eu" in urls["qq"]
    nowhere(hand_edited, text, as_json)


def test_doctor_says_move_them_to_api_key_env(hand_edited):
    text, as_json = invoke(["doctor"]), invoke(["doctor", "--json"])
    assert text.exit_code == 1 and as_json.exit_code == 1
    rows = [c for c in json.loads(as_json.stdout)["checks"]
            if c["section"] in ("provider bob", "provider qq") and c["check"] == "endpoint"]
    assert len(rows) == 2
    for row in rows:
        assert row["status"] == "fail"
        assert "credentials in the base URL: move them to --api-key-env" in row["detail"]
        assert "--api-key-env" in row["fix"]
    assert "gaierror" not in text.output and "unreachable" not in text.output
    assert text.stdout.count("credentials in the base URL: move them to --api-key-env") == 2
    nowhere(hand_edited, text, as_json)


def test_errors_models_and_runs_mask_them(hand_edited, scripted_server):
    from orchestrator.testing.scripted_server import Reply

    scripted_server.script("m", Reply(status=500, error_message="upstream down"))
    results = [client(["fanout", "-m", "bob/m,qq/m", "-p", "x"]),
               client(["fanout", "-m", "bob/m", "-p", "x", "--json"]),
               invoke(["models"]), invoke(["models", "--json"]), invoke(["runs", "--json"])]
    nowhere(hand_edited, *results)
