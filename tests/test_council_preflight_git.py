"""`--diff` outside a work tree, or with a bad range, says what to do in orch's words, never
git's raw warning or usage dump; a seat shown before the bundle exists has no `None` label."""

from __future__ import annotations

import subprocess

import pytest

from orchestrator.council.display import print_run
from orchestrator.council.preflight import git_diff
from orchestrator.errors import OrchError


def test_diff_outside_a_work_tree_names_the_fix_not_gits_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    with pytest.raises(OrchError) as err:
        git_diff("main..HEAD", cwd=tmp_path)
    msg = str(err.value)
    assert "needs a git work tree" in msg and "--context" in msg
    assert "warning:" not in msg and "usage:" not in msg and "\n" not in msg


def test_a_bad_range_keeps_gits_reason_without_its_prefix(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    with pytest.raises(OrchError) as err:
        git_diff("nosuch..alsonot", cwd=tmp_path)
    msg = str(err.value)
    assert msg.startswith("git diff nosuch..alsonot failed: ")
    assert "fatal:" not in msg and "\n" not in msg


def test_seats_without_a_label_print_no_none(capsys):
    seat = {"model": "p/a", "label": None, "status": "reviewed", "reason": None,
            "street_cred": None, "conformed": True, "cut": False, "raised": 0, "confirmed": 0}
    doc = {"run_id": "r1", "status": "error", "verdict": None, "chair": {"model": "p/c"},
           "seats": [seat], "notices": [], "requests": 1, "cost_exact": True, "cost_usd": 0.0,
           "usage": {"input_tokens": 1, "output_tokens": 1}, "dir": "/tmp/x"}
    print_run(doc, None, None)
    out = capsys.readouterr().out
    assert "p/a: 0 findings" in out and "None" not in out
