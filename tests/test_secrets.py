"""Key values never reach what orch writes."""

from orchestrator.secrets import scrub, secret_values
from orchestrator.store import JsonlFile, write_json_atomic


def test_scrub_replaces_env_secret_values_and_key_shapes(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_API_KEY", "abc123-very-secret")
    monkeypatch.setenv("KEYBOARD_LAYOUT", "dvorak-programmer")
    assert "abc123-very-secret" in secret_values()
    assert "dvorak-programmer" not in secret_values()
    text = "key abc123-very-secret and sk-proj-0123456789abcdef in a task-list"
    assert scrub(text) == "key *** and *** in a task-list"


def test_store_writes_are_scrubbed(monkeypatch, tmp_path):
    monkeypatch.setenv("X_TOKEN", "tok-9f8e7d6c5b4a")
    write_json_atomic(tmp_path / "a.json", {"answer": "the token is tok-9f8e7d6c5b4a"})
    conversation = JsonlFile(tmp_path / "b.jsonl")
    conversation.append({"messages": ["tok-9f8e7d6c5b4a"]})
    conversation.close()
    for name in ("a.json", "b.jsonl"):
        text = (tmp_path / name).read_text()
        assert "tok-9f8e7d6c5b4a" not in text and "***" in text
