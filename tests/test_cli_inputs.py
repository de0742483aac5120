"""Numbers and inputs the CLI takes are checked before anything runs: usage errors, exit 2,
one line naming the option, nothing sent."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli


def fanout(*args: str):
    return CliRunner().invoke(cli, ["fanout", *args])


@pytest.mark.parametrize("option, value", [
    ("--timeout", "nan"), ("--timeout", "inf"), ("--timeout", "-1"), ("--timeout", "0"),
    ("--timeout", "1e308"), ("--max-cost", "nan"), ("--max-cost", "inf"),
    ("--max-cost", "-0.5"), ("--leg-seconds", "nan"), ("--leg-seconds", "0"),
])
def test_meaningless_numbers_are_usage_errors(orch, scripted_server, option, value):
    orch.provider()
    result = fanout("-m", "scripted/m", "-p", "x", option, value)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.output
    assert "Traceback" not in result.output
    assert scripted_server.count() == 0


def test_a_max_cost_of_zero_is_still_a_ceiling(orch, scripted_server):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    result = fanout("-m", "scripted/m", "-p", "x", "--max-cost", "0", "--json")
    assert result.exit_code == 1 and scripted_server.count() == 0  # refused, nothing sent
    assert "not launched" in result.stdout


@pytest.mark.parametrize("models", [",,,", "", " , "])
def test_an_empty_model_list_is_a_usage_error(orch, scripted_server, models):
    orch.provider()
    result = fanout("-m", models, "-p", "x")
    assert result.exit_code == 2
    assert "names no model" in result.output and scripted_server.count() == 0


def test_a_device_or_fifo_is_not_a_regular_file(orch, scripted_server, tmp_path):
    orch.provider()
    result = fanout("-m", "scripted/m", "-p", "x", "--context", "/dev/zero")
    assert result.exit_code == 2
    assert "--context /dev/zero is not a regular file" in result.output
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    result = fanout("-m", "scripted/m", "-p", "x", "-c", str(fifo))
    assert result.exit_code == 2 and "is not a regular file" in result.output
    result = fanout("-m", "scripted/m", "--prompt-file", str(fifo))
    assert result.exit_code == 2 and "--prompt-file" in result.output
    assert scripted_server.count() == 0
