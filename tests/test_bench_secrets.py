"""A key value a model writes into a bench answer never reaches the results or the report."""

from __future__ import annotations

import json
import textwrap

from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.security import secrets
from orchestrator.testing.scripted_server import Reply

KEY = "sk-bench-leak-0123456789abcdef"


def test_a_registered_key_in_an_answer_stays_out_of_every_report_file(
        orch, orch_home, scripted_server, tmp_path, monkeypatch):
    orch.provider()
    secrets.register(KEY, "a test key")
    scripted_server.script("leaky", Reply(text=f"The answer is 42. My key is {KEY}."))
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "t1.toml").write_text('id = "t1"\ntask = "What is 6 x 7?"\n'
                                   '[expect]\ncontains = "42"\n')
    (tmp_path / "bench.toml").write_text(textwrap.dedent("""\
        [bench]
        cases = "cases"
        trials = 1

        [[contestants]]
        name = "leaky"
        model = "scripted/leaky"
        tools = "none"
        """))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["bench", "--config", "bench.toml", "--yes", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    results = orch_home / "bench" / f"{doc['bench_id']}.json"
    folder = results.with_suffix("")
    written = results.read_text()
    assert KEY not in written and KEY not in (folder / "report.md").read_text()
    saved = json.loads(written)
    assert saved["trials"][0]["passed"] and "The answer is 42" in saved["trials"][0]["answer"]

    # a results file that holds the key where the report prints text (a hand-edited or old
    # file): re-rendering it must still keep the key out of report.md and report.html
    saved["exclusions"] = [{"task": "t1", "contestant": "leaky", "trial": 1,
                            "reason": f"set-up failed: {KEY}"}]
    results.write_text(json.dumps(saved))
    again = CliRunner().invoke(cli, ["bench", "report", str(results)])
    assert again.exit_code == 0, again.output
    md, page = (folder / "report.md").read_text(), (folder / "report.html").read_text()
    assert "set-up failed: ***" in md and "set-up failed: ***" in page  # the reason is shown
    for text in (md, page, result.output, again.output):
        assert KEY not in text
