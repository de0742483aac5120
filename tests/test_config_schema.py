"""config.json is checked when it is loaded: one line naming the file, the key path and the
type expected; an ORCH_HOME orch cannot write to is one line naming it and the fix."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.cli import cli
from orchestrator.config_schema import SCHEMA, first_problem


def write_config(home, data) -> None:
    (home / "config.json").write_text(json.dumps(data) if not isinstance(data, bytes) else "")
    if isinstance(data, bytes):
        (home / "config.json").write_bytes(data)


@pytest.mark.parametrize("data, where, expected", [
    ({"providers": []}, "providers", "must be an object ({...}), not a list"),
    ({"providers": {"v": {"base_url": 5}}}, "providers.v.base_url", "must be a string, not a number"),
    ({"providers": {"v": "http://x"}}, "providers.v", "must be an object ({...}), not a string"),
    ({"aliases": {"fast": ["a"]}}, "aliases.fast", "must be a string, not a list"),
    ({"councils": {"c": ["a", 3]}}, "councils.c[1]", "must be a string, not a number"),
    ({"defaults": {"models": "a,b"}}, "defaults.models", "must be a list ([...]), not a string"),
    ({"providers": {"v": {"base_url": "http://x", "max_concurrent": 0}}},
     "providers.v.max_concurrent", "must be at least 1, not 0"),
    ({"providers": {"v": {"base_url": "http://x", "input_cost_per_mtok": "1"}}},
     "providers.v.input_cost_per_mtok", "must be a number, not a string"),
])
def test_a_wrong_type_is_one_line_naming_file_key_and_type(orch_home, data, where, expected):
    write_config(orch_home, data)
    result = CliRunner().invoke(cli, ["provider", "list"])
    assert result.exit_code == 1
    line = result.output.strip()
    assert "\n" not in line and "Traceback" not in line and "internal error" not in line
    assert line == (f"orch: error: config file {orch_home / 'config.json'}: {where} "
                    f"{expected}; fix it (or remove the key)")


def test_invalid_utf8_names_the_file_and_the_byte(orch_home):
    write_config(orch_home, b'{"aliases": {"x": "\xff"}}')
    result = CliRunner().invoke(cli, ["fanout", "-m", "a/b", "-p", "x"])
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"orch: error: config file {orch_home / 'config.json'} is not valid UTF-8 (byte 0xff "
        "at offset 19); fix its encoding or remove it")


def test_unknown_keys_are_left_alone(orch_home):
    write_config(orch_home, {"providers": {"v": {"base_url": "http://x", "tier": "minimal"}},
                             "future_section": [1, 2]})
    result = CliRunner().invoke(cli, ["provider", "list"])
    assert result.exit_code == 0, result.output


def test_an_orch_home_that_cannot_be_written_is_named_with_the_fix(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("ORCH_HOME", str(blocker / "home"))
    from orchestrator import runtime

    runtime.config.cache_clear()
    result = CliRunner().invoke(cli, ["provider", "add", "v", "--base-url", "http://x/v1"])
    assert result.exit_code == 1
    line = result.output.strip()
    assert line.startswith(f"orch: error: cannot write to {blocker / 'home'} (")
    assert "set ORCH_HOME to a writable directory" in line and "internal error" not in line
    runtime.config.cache_clear()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
def test_a_read_only_orch_home_is_named_with_the_fix(orch_home, scripted_server, orch):
    orch.provider()
    os.chmod(orch_home, 0o500)
    try:
        result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "-p", "x"])
    finally:
        os.chmod(orch_home, 0o700)
    assert result.exit_code == 1 and "set ORCH_HOME to a writable directory" in result.output
    assert scripted_server.count() == 0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["providers", "aliases", "councils", "defaults", "plugins", "v",
                         "base_url", "models", "max_concurrent", "enabled", "x"]),
        inner, max_size=4),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(list(SCHEMA["properties"])), json_values, max_size=4))
def test_the_hand_walked_schema_agrees_with_jsonschema(data):
    import jsonschema

    valid = jsonschema.Draft202012Validator(SCHEMA).is_valid(data)
    assert (first_problem(data, SCHEMA) is None) == valid
