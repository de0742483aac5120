"""What users of eval tools expect of `orch bench` (issue 29 item 5): [bench] keys checked,
--maxfail, -q, the failure summary, --junit-xml in pytest's own shape, `bench show`."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

from orchestrator.testing.daemon import invoke
from orchestrator.testing.sandbox import unsafe_unless_confined
from orchestrator.testing.scripted_server import Reply

DATE = "format-03-date"
RIGHT = '{"year": 2026, "month": 11, "day": 30}'


def bench(*args, input=None):
    return invoke(["bench", *unsafe_unless_confined(), *args], input=input)


def test_a_typo_in_bench_is_refused_in_one_line(orch, scripted_server, tmp_path):
    orch.provider()
    config = tmp_path / "bench.toml"
    config.write_text('[bench]\nbuiltin = "format"\ntrails = 5\n'
                      '[[contestants]]\nname = "a"\nmodel = "scripted/a"\n')
    for args in (["--config", str(config), "--yes"], ["--selftest", "--config", str(config)]):
        result = bench(*args)
        assert result.exit_code == 1, result.output
        assert result.output.strip() == \
            "orch: error: config: unknown key 'trails' in [bench]; did you mean trials?"
    assert scripted_server.count() == 0  # before: 3 trials ran per task, silently


def test_maxfail_stops_after_n_failures_and_keeps_what_was_graded(orch, scripted_server,
                                                                   tmp_path):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("a", Reply(text="no"))
    out = tmp_path / "r.json"
    result = bench("--builtin", "format", "--models", "scripted/a", "--trials", "3",
                   "--jobs", "1", "--maxfail", "2", "--yes", "--out", str(out))
    assert result.exit_code == 1, result.output
    doc = json.loads(out.read_text())
    failed = [r for r in doc["trials"] if not r["passed"] and not r["excluded"]]
    # a trial already answered when the second failure was graded is still graded (jobs 1:
    # one more at most); nothing new starts
    assert 2 <= len(failed) <= 3
    assert f"orch: stopped (--maxfail 2 reached) after {len(failed)} of 15 trials" in \
        result.stderr, result.stderr[-700:]
    assert scripted_server.count("a") <= 4
    assert all(r["excluded"] == "interrupted: --maxfail 2 reached before it was graded"
               for r in doc["trials"] if r["excluded"])
    assert "Stopped (--maxfail 2 reached): partial results" in result.stdout


def test_quiet_prints_one_progress_line(orch, scripted_server):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("a", Reply(text=RIGHT))
    scripted_server.script("b", Reply(text="no"))
    loud = bench("--builtin", "format", "--only", DATE, "--models", "scripted/a,scripted/b",
                 "--trials", "2", "--yes")
    quiet = bench("--builtin", "format", "--only", DATE, "--models", "scripted/a,scripted/b",
                  "--trials", "2", "--yes", "-q")
    assert quiet.exit_code == 0, quiet.output
    assert loud.stderr.count("PASS ") == 2 and "PASS " not in quiet.stderr
    progress = [line for line in quiet.stderr.splitlines() if "trials ·" in line]
    assert progress == ["4/4 trials · 2 passed · 2 failed · 0 excluded"]


def test_the_failure_summary_names_task_contestant_and_the_checks_last_lines(
        orch, scripted_server):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("a", Reply(text=RIGHT))
    scripted_server.script("b", Reply(text="no"))
    result = bench("--builtin", "format", "--only", DATE, "--models", "scripted/a,scripted/b",
                   "--trials", "2", "--yes")
    out = result.stdout
    assert "failed trials (2):" in out
    summary = out[out.index("failed trials (2):"):].splitlines()
    assert summary[1].split() == ["task", "contestant", "trial", "check", "(last", "lines)"]
    rows = [line for line in summary[3:] if line.strip()]
    assert [r.split()[:3] for r in rows] == [[DATE, "scripted/b", "#1"],
                                             [DATE, "scripted/b", "#2"]]
    assert all("JSON" in r or "json" in r for r in rows), rows  # what the check said


def _structure(root):
    """{(parent tag, tag): attribute names} of an XML tree."""
    seen: dict[tuple[str, str], set[str]] = {}
    for parent in root.iter():
        for child in parent:
            seen.setdefault((parent.tag, child.tag), set()).update(child.attrib)
    seen.setdefault(("", root.tag), set()).update(root.attrib)
    return seen


def test_junit_xml_has_the_shape_of_pytests_own(orch, scripted_server, tmp_path):
    # pytest's own JUnit file for a pass, a failure and a skip: the reference shape
    (tmp_path / "test_ref.py").write_text(
        "import pytest\ndef test_ok():\n    pass\ndef test_bad():\n    assert 0, 'no'\n"
        "def test_skip():\n    pytest.skip('excluded')\n")
    ref = tmp_path / "ref.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    str(tmp_path / "test_ref.py"), f"--junit-xml={ref}"],
                   cwd=tmp_path, capture_output=True, check=False)
    reference = _structure(ET.parse(ref).getroot())

    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("a", Reply(text=RIGHT))
    scripted_server.script("b", Reply(text="no"))
    xml = tmp_path / "ci" / "bench.xml"
    result = bench("--builtin", "format", "--only", DATE, "--models", "scripted/a,scripted/b",
                   "--trials", "2", "--yes", "--junit-xml", str(xml))
    assert result.exit_code == 0, result.output
    root = ET.parse(xml).getroot()
    ours = _structure(root)
    for (parent, tag), attrs in ours.items():
        assert (parent, tag) in reference, (parent, tag)
        assert attrs <= reference[(parent, tag)], (tag, attrs - reference[(parent, tag)])
    for key in (("testsuites", "testsuite"), ("testsuite", "testcase")):
        assert ours[key] == reference[key]  # every attribute pytest writes is there
    suites = {s.get("name"): s for s in root}
    assert set(suites) == {"scripted/a", "scripted/b"}
    assert [(s.get("tests"), s.get("failures")) for s in suites.values()] == \
        [("2", "0"), ("2", "2")]
    failures = root.findall("testsuite/testcase/failure")
    assert len(failures) == 2 and all("JSON" in f.text or "json" in f.text for f in failures)
    assert {c.get("name") for c in root.findall("testsuite/testcase")} == \
        {f"{DATE}[1]", f"{DATE}[2]"}


def test_an_unwritable_junit_file_is_one_line_and_the_results_are_kept(orch, scripted_server,
                                                                       tmp_path):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("a", Reply(text=RIGHT))
    (tmp_path / "afile").write_text("a file, not a folder")
    out = tmp_path / "r.json"
    # found unwritable after the run: exit 1, the results kept; a directory is a usage
    # mistake, refused before anything runs: exit 2
    for target, why, code in ((tmp_path / "afile" / "j.xml", "cannot be written", 1),
                              (tmp_path, "is a directory", 2)):
        result = bench("--builtin", "format", "--only", DATE, "--models", "scripted/a",
                       "--trials", "1", "--yes", "--out", str(out), "--junit-xml",
                       str(target))
        assert result.exit_code == code, result.output
        assert why in result.output and "Traceback" not in result.output
    assert out.exists()  # the first run's results were saved before the XML failed
