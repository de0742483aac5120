"""Start states: one per distinct set of files, made before any trial; a lean repository."""

from __future__ import annotations

import os
import subprocess

import anyio

from orchestrator.bakeoff import run as R
from orchestrator.bakeoff import tasks as T
from orchestrator.bakeoff.plan import Plan

GIT = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
       "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@a.invalid",
       "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@a.invalid"}


def task(id, files, **kw):
    return T.load_task_data({"id": id, "task": "do it", "verify": "true", "files": files, **kw})


def git(folder, *args):
    return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True,
                          check=True, env=GIT).stdout


def test_tasks_with_the_same_files_share_one_start_state_made_up_front(monkeypatch):
    shared = {"src/a.py": "A = 1\n"}
    tasks = [task("t1", shared), task("t2", dict(shared)), task("t3", {"b.txt": "b\n"}),
             task("t4", shared, git_init=False), task("t5", {"a": "x", "a/b": "y"})]
    made, real = [], R._prepare

    def counted(t):
        made.append(t.id)
        return real(t)  # the real thing, counted

    monkeypatch.setattr(R, "_prepare", counted)
    runner = R.Runner(plan=Plan(contestants=[], tasks=tasks, source="test"), bench_id="b",
                      config=None)
    runner.templates = {}
    anyio.run(runner.prepare_all)
    assert sorted(made) == ["t1", "t3", "t4", "t5"]  # t2 has t1's files: no second state

    async def folders():
        return [await runner.folder(t, row) for t, row in zip(tasks, rows, strict=True)]

    rows = [{"excluded": None} for _ in tasks]
    got = anyio.run(folders)
    try:
        assert got[4] is None and rows[4]["excluded"].startswith("set-up failed")
        assert got[0] != got[1]  # one state, two fresh folders, two repositories
        for folder in got[:2]:
            assert (folder / "src" / "a.py").read_text() == "A = 1\n"
            assert git(folder, "log", "--format=%s") == "start state\n"
        (got[0] / "src" / "a.py").write_text("A = 2\n")
        assert git(got[1], "status", "--porcelain") == ""
        assert (got[2] / "b.txt").is_file() and not (got[3] / ".git").exists()
    finally:
        for folder in got:
            if folder is not None:
                T.remove_folder(folder)


def test_the_start_repository_is_lean_and_still_a_full_repository():
    root = T.make_folder(task("t", {"x.py": "X = 1\n"}))
    try:
        entries = {p.relative_to(root / ".git").as_posix() for p in (root / ".git").rglob("*")}
        assert not {"logs", "info", "COMMIT_EDITMSG", "objects/info"} & entries
        assert git(root, "status", "--porcelain") == ""
        git(root, "fsck", "--strict")
        (root / "x.py").write_text("X = 2\n")
        git(root, "commit", "-qam", "two")
        assert git(root, "log", "--format=%s") == "two\nstart state\n"
        assert "commit: two" in git(root, "reflog")  # git starts a reflog when it needs one
    finally:
        T.remove_folder(root)
