"""`orch spend` against a real ledger file in a temporary ORCH_HOME."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.ledger.spend import Ledger

CONTRACT = {"legs", "total_cost_usd", "unknown_cost_legs", "failed_cost_usd", "suspect_legs",
            "suspect_cost_usd", "bounded_legs", "bound_cost_usd", "in_flight_at_kill", "groups"}
GROUP_KEYS = {"key", "legs", "input_tokens", "output_tokens", "reasoning_tokens",
              "cached_tokens", "cost_usd", "unknown_cost_legs", "failed_legs", "suspect_legs"}


@pytest.fixture
def home(orch_home):
    """The kit's ORCH_HOME (temporary, offline, no ORCH_LEDGER_URL)."""
    return orch_home


@pytest.fixture
def orch(home):
    runner = CliRunner()

    def run(*args: str, code: int = 0):
        result = runner.invoke(cli, ["spend", *args], catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result

    return run


def leg(**overrides):
    base = {"wave_id": "w1", "leg_id": "w1-a", "kind": "leg", "model": "openai/gpt-4o-mini",
            "provider": "openai", "status": "complete", "input_tokens": 1200,
            "output_tokens": 300, "cost_usd": 0.0123, "cost_source": "priced"}
    return {**base, **overrides}


@pytest.fixture
def filled(home):
    ledger = Ledger()
    ledger.append_many([
        leg(),
        leg(leg_id="w1-b", model="mystery/x", provider="mystery", cost_usd=None,
            cost_source="unknown"),
        leg(leg_id="w1-c", status="error", reason="timeout: no answer", output_tokens=0,
            cost_usd=0.004),
        leg(ts=datetime.now(UTC) - timedelta(days=30), leg_id="old", cost_usd=5.0),
    ])
    yield ledger
    ledger.close()


def test_json_contract(orch, filled):
    data = json.loads(orch("--json").stdout)
    assert set(data) == CONTRACT
    assert data["legs"] == 3  # the 30-day-old row is outside the default --since 7d
    assert data["total_cost_usd"] == pytest.approx(0.0163)
    assert data["unknown_cost_legs"] == 1
    assert data["failed_cost_usd"] == pytest.approx(0.004)
    assert data["groups"] == []


def test_json_group_by_model(orch, filled):
    data = json.loads(orch("--json", "--group-by", "model").stdout)
    assert all(set(g) == GROUP_KEYS for g in data["groups"])
    groups = {g["key"]: g for g in data["groups"]}
    assert groups["openai/gpt-4o-mini"]["legs"] == 2
    assert groups["openai/gpt-4o-mini"]["failed_legs"] == 1
    assert groups["mystery/x"]["unknown_cost_legs"] == 1


def test_since_all_includes_old_rows(orch, filled):
    assert json.loads(orch("--json", "--since", "all").stdout)["legs"] == 4
    assert json.loads(orch("--json", "--since", "60d").stdout)["legs"] == 4


def test_human_group_by_model(orch, filled):
    out = orch("--group-by", "model").stdout
    assert "openai/gpt-4o-mini" in out and "mystery/x" in out
    assert "3 legs, $0.0163 total since" in out
    assert "total is a floor: 1 leg has unknown cost" in out
    assert "$0.0040 went to failed legs (1 leg did not complete)" in out


def test_human_totals_without_groups(orch, filled):
    out = orch().stdout
    assert "openai/gpt-4o-mini" not in out
    assert "total is a floor" in out and "went to failed legs" in out


def test_no_floor_or_failed_lines_when_all_known_and_complete(orch, home):
    Ledger().append(leg())
    out = orch("--group-by", "status").stdout
    assert "complete" in out
    assert "floor" not in out and "failed legs" not in out


def test_empty_ledger_is_friendly(orch, home):
    result = orch()
    assert result.stdout.startswith("no spend recorded since ")
    assert "(7d)" in result.stdout
    assert orch("--since", "all").stdout.startswith("no spend recorded yet")
    assert json.loads(orch("--json").stdout)["legs"] == 0


@pytest.mark.parametrize("since", ["yesterday", "7 days", "-1d"])
def test_bad_since_is_one_line_error(orch, home, since):
    result = orch("--since", since, code=2)
    assert result.stdout == ""
    assert result.stderr.startswith("orch: error: cannot read --since")
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.output


def test_bad_group_by_is_usage_error(orch, home):
    result = orch("--group-by", "colour", code=2)
    assert "Traceback" not in result.output


def test_unopenable_ledger_is_one_line_error(orch, tmp_path, monkeypatch):
    junk = tmp_path / "junk.db"
    junk.write_text("not a database\n" * 100)
    monkeypatch.setenv("ORCH_LEDGER_URL", f"sqlite:///{junk}")
    result = orch(code=1)
    assert result.stderr.startswith("orch: error: cannot open spend ledger")
    assert result.stderr.count("\n") == 1


def test_a_since_reaching_before_year_one_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    from click.testing import CliRunner

    from orchestrator.cli import cli

    result = CliRunner().invoke(cli, ["spend", "--since", "99999999d"])
    assert result.exit_code == 2 and "--since all" in result.stderr
    assert "Traceback" not in result.output


def test_reading_spend_never_creates_a_ledger(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from orchestrator.cli import cli

    target = tmp_path / "not" / "there" / "ledger.db"
    monkeypatch.setenv("ORCH_LEDGER_URL", f"sqlite:///{target}")
    result = CliRunner().invoke(cli, ["spend"])
    assert result.exit_code == 0 and "no ledger there yet" in result.stdout
    result = CliRunner().invoke(cli, ["spend", "--json"])
    assert json.loads(result.stdout)["legs"] == 0
    assert not (tmp_path / "not").exists()
