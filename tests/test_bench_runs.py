"""Benches are runs (issue 29 item 6): `orch runs` lists a bench with its trial waves folded
under it, `runs show` opens one (also one saved with --out), and `runs gc` removes the
results, the report and every trial folder, counting the bytes. Before, `runs gc` removed
the results file, left every trial-wave folder and reported 0.0 MB freed."""

from __future__ import annotations

import json

from orchestrator.testing.daemon import invoke
from orchestrator.testing.sandbox import unsafe_unless_confined
from orchestrator.testing.scripted_server import Reply

DATE = "format-03-date"


def run_bench(*extra):
    result = invoke(["bench", *unsafe_unless_confined(), "--builtin", "format", "--only", DATE,
                     "--models", "scripted/a,scripted/b", "--trials", "2", "--yes", "--json",
                     *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def size(paths):
    total = 0
    for p in paths:
        total += p.stat().st_size if p.is_file() else \
            sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return total


def test_a_bench_is_one_run_with_its_waves_and_gc_frees_them_all(orch, scripted_server,
                                                                 orch_home, tmp_path):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    scripted_server.script("a", Reply(text='{"year": 2026, "month": 11, "day": 30}'))
    scripted_server.script("b", Reply(text="no"))
    home_bench = run_bench()
    out = tmp_path / "elsewhere" / "mine.json"
    out_bench = run_bench("--out", str(out))
    runs_dir = orch_home / "runs"
    folders = sorted(p.name for p in runs_dir.iterdir())
    assert folders and all(f.startswith("bench-") for f in folders)

    listed = json.loads(invoke(["runs", "--json"]).stdout)["runs"]
    assert sorted(r["id"] for r in listed) == sorted([home_bench["bench_id"],
                                                     out_bench["bench_id"]])
    for r in listed:  # each bench once, its two trial waves folded under it
        assert r["kind"] == "bench" and r["legs"] == 4 and r["status"] == "complete"
        assert [(w["id"], w["legs"]) for w in r["waves"]] == \
            [(f"{r['id']}-1", 2), (f"{r['id']}-2", 2)]
    text = invoke(["runs"]).stdout
    assert f"  └ {home_bench['bench_id']}-1  complete  2 legs" in text

    shown = invoke(["runs", "show", out_bench["bench_id"]])  # --out: found through its link
    assert shown.exit_code == 0, shown.output
    assert f"orch bench show {out}" in shown.stdout
    assert f"wave {out_bench['bench_id']}-2  complete  2 legs" in shown.stdout

    mine = [p for p in runs_dir.iterdir()]
    results = [orch_home / "bench" / f"{home_bench['bench_id']}.json", out,
               out.with_suffix(""), orch_home / "bench" / home_bench["bench_id"],
               orch_home / "bench" / f"{out_bench['bench_id']}.where"]
    expected = size(mine + results)
    gc = invoke(["runs", "gc", "--older-than", "2099-01-01", "--json"])
    assert gc.exit_code == 0, gc.output
    doc = json.loads(gc.stdout)
    assert sorted(doc["removed"]) == sorted([home_bench["bench_id"], out_bench["bench_id"]])
    assert doc["bytes_freed"] == expected > 0
    assert list(runs_dir.iterdir()) == [] and not any(p.exists() for p in results)


def test_a_bench_without_results_is_listed_from_its_waves_and_collected(
        orch, scripted_server, orch_home):
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    bench = run_bench()
    (orch_home / "bench" / f"{bench['bench_id']}.json").unlink()  # killed before writing it
    [entry] = json.loads(invoke(["runs", "--json"]).stdout)["runs"]
    assert entry["id"] == bench["bench_id"] and entry["status"] == "interrupted"
    assert len(entry["waves"]) == 2
    shown = invoke(["runs", "show", bench["bench_id"]])
    assert shown.exit_code == 0 and "no results file" in shown.stdout
    gc = invoke(["runs", "gc", "--older-than", "2099-01-01"])
    assert gc.exit_code == 0, gc.output
    assert "removed bench " in gc.stdout and "2 trial wave(s)" in gc.stdout
    assert " 0.0 MB freed" not in gc.stdout and " kB freed" in gc.stdout
    assert list((orch_home / "runs").iterdir()) == []


def test_gc_never_removes_what_is_not_the_benchs(orch, scripted_server, orch_home, tmp_path):
    """A --out path later reused for another file, and a folder of the user's that happens
    to share the report folder's name: gc keeps both."""
    orch.provider(input_cost_per_mtok=1.0, output_cost_per_mtok=1.0)
    first = run_bench("--out", str(tmp_path / "a.json"))
    (tmp_path / "a.json").write_text('{"mine": true}')  # the user's file now
    run_bench("--out", str(tmp_path / "b.json"))
    (tmp_path / "b" / "notes.txt").write_text("the user's")  # beside the report files
    gc = invoke(["runs", "gc", "--older-than", "2099-01-01", "--json"])
    assert gc.exit_code == 0, gc.output
    assert first["bench_id"] in json.loads(gc.stdout)["removed"]
    assert (tmp_path / "a.json").read_text() == '{"mine": true}'
    assert (tmp_path / "b" / "notes.txt").exists() and not (tmp_path / "b.json").exists()
    assert list((orch_home / "runs").iterdir()) == []
