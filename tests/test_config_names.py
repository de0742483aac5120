"""The rules for names, where config.json is read (models/names.py): every entry a hand edit
can break is named with its key path and a fix, and loading stops at the first, in one line."""

from __future__ import annotations

import json

import pytest

from orchestrator.config import Config
from orchestrator.errors import OrchError
from orchestrator.models.names import config_problems, model_name_problem

BAD_NAMES = ["a/b\nc", "a/b\rc", "a/b\x1b[2Jc", "a/b\u202ec", "a/b\u200bc", "a/b c", "a/b,c",
             "a/b\tc", "a/" + "x" * 400]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_model_name_that_would_forge_a_line_is_refused(name):
    assert model_name_problem(name)


@pytest.mark.parametrize("name", ["openai/gpt-4o-mini", "ollama/llama3:8b", "gw/a.b_c-d@hot",
                                  "local/gemma-3-270m", "bedrock/anthropic.claude-v2:1",
                                  "scripted/模型"])
def test_ordinary_model_names_pass(name):
    assert model_name_problem(name) is None


def test_every_bad_entry_is_named_and_loading_stops_at_the_first(tmp_path):
    data = {"providers": {"openai": {"base_url": "http://x/v1"}, "ANTHROPIC": {"base_url": "y"},
                          "good": {"base_url": "z"}},
            "aliases": {"fast": "a/b\nall tests passed", "ok": "good/m"},
            "councils": {"c\x1b": ["good/m"], "team": ["good/m", "x/y z"]},
            "defaults": {"models": ["good/m", "a/\u202eb"], "chair": "good/m"}}
    where = [w for w, _, _ in config_problems(data)]
    assert where == ["providers.ANTHROPIC", "providers.openai", "aliases.fast",
                     "councils.c\\u001b", "councils.team[1]", "defaults.models[1]"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(OrchError) as refused:
        Config.load(path)
    said = str(refused.value)
    assert "\n" not in said and said.startswith(f"config file {path}: providers.ANTHROPIC: ")
    assert "orch provider remove ANTHROPIC" in said
    assert Config.load(path, validate=False).providers["openai"]  # doctor still reads it
