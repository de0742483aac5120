"""Task files, trial folders and every kind of hidden check."""

from __future__ import annotations

import json
import subprocess

import pytest

from orchestrator.bakeoff import tasks as T
from orchestrator.bakeoff.contestants import command_line, parse_contestant
from orchestrator.bakeoff.guard import Guard
from orchestrator.errors import OrchError

UNCONFINED = Guard(bwrap=None)  # the limits without bubblewrap (tests/test_bench_sandbox.py)


def task(**kw):
    return T.load_task_data({"id": "t", "task": "do it", **kw})


@pytest.mark.parametrize("expect,answer,ok", [
    ({"contains": ["a", "b"]}, "b then a", True),
    ({"contains": ["a", "b"]}, "only a", False),
    ({"regex": r"^\d+$"}, "x\n42\n", True),
    ({"regex": r"^\d+$"}, "x42", False),
    ({"equals": "42"}, "  42\n", True),
    ({"equals": "42"}, "42.", False),
    ({"json_schema": {"type": "object", "required": ["a"]}}, '{"a": 1}', True),
    ({"json_schema": {"type": "object", "required": ["a"]}}, "```json\n{\"a\": 1}\n```", True),
    ({"json_schema": {"type": "object", "required": ["a"]}}, '{"b": 1}', False),
    ({"json_schema": {"type": "object"}}, "not json", False),
    ({"contains": ["x"], "regex": "y"}, "x", False),  # every expectation must hold
])
def test_expect_kinds(expect, answer, ok):
    passed, output, error = T.grade(task(expect=expect), answer, None, UNCONFINED)
    assert passed is ok and error is None, output


def test_python_check_is_imported_from_the_task_folder(tmp_path):
    (tmp_path / "bench_check_mod_xyz.py").write_text(
        "def is_even(answer):\n    return int(answer) % 2 == 0\n")
    (tmp_path / "t.toml").write_text('id = "t"\ntask = "n"\n[expect]\n'
                                     'python = "bench_check_mod_xyz:is_even"\n')
    t = T.load_tasks(tmp_path)[0]
    assert T.grade(t, "4", None, UNCONFINED)[0] is True
    passed, output, error = T.grade(t, "five", None, UNCONFINED)
    assert passed is False and "ValueError" in output and error is None  # a no, not a crash


def test_verify_runs_in_the_trial_folder_with_the_answer_file():
    t = task(verify='test "$(cat f.txt)" = start && grep -q yes "$ORCH_BENCH_ANSWER"',
             files={"f.txt": "start"})
    folder = T.make_folder(t)
    try:
        assert T.grade(t, "yes", folder, UNCONFINED)[0] is True
        passed, output, _ = T.grade(t, "no", folder, UNCONFINED)
        assert passed is False and output.startswith("exit 1")
        log = subprocess.run(["git", "log", "--oneline"], cwd=folder, capture_output=True,
                             text=True).stdout
        assert "start state" in log  # a fresh repository with the start state committed
    finally:
        T.remove_folder(folder)
    assert not folder.exists()


def test_git_init_can_be_turned_off():
    folder = T.make_folder(task(expect={"equals": "x"}, git_init=False, files={"a": "b"}))
    try:
        assert (folder / "a").read_text() == "b" and not (folder / ".git").exists()
    finally:
        T.remove_folder(folder)


def test_shared_files_and_task_files(tmp_path):
    (tmp_path / "_files.toml").write_text('[files]\n"lib.py" = "X = 1"\n"a.txt" = "shared"\n')
    (tmp_path / "one.json").write_text(json.dumps({"id": "one", "task": "t", "files":
                                                   {"a.txt": "own"}, "expect": {"equals": "1"}}))
    [t] = T.load_tasks(tmp_path)
    assert t.files == {"lib.py": "X = 1", "a.txt": "own"}


@pytest.mark.parametrize("data,message", [
    ({"id": "t", "task": "x"}, "exactly one check"),
    ({"id": "t", "task": "x", "verify": "true", "expect": {"equals": "y"}}, "exactly one"),
    ({"id": "t", "task": "x", "expect": {"fuzzy": 1}}, "unknown expect kind"),
    ({"id": "", "task": "x", "verify": "true"}, "`id` is required"),
    ({"id": "t", "task": "x", "verify": "true", "files": {"/etc/x": "y"}}, "relative"),
    ({"id": "t", "task": "x", "verify": "true", "files": {"a": 3}}, "map relative paths"),
])
def test_bad_task_files_are_one_line(data, message):
    with pytest.raises(OrchError, match=message):
        T.load_task_data(data)


def test_duplicate_task_ids_are_refused(tmp_path):
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps({"id": "same", "task": "x", "verify": "true"}))
    with pytest.raises(OrchError, match="appears twice"):
        T.load_tasks(tmp_path)


def test_placeholders_are_replaced_in_every_argument_without_a_shell():
    c = parse_contestant({"name": "agent", "kind": "command", "command": "run-{model}",
                          "args": ["--in", "{cwd}", "{task}; rm -rf /", "{verify}"],
                          "model": "m1"}, "c")
    argv = command_line(c, "the prompt", "/tmp/x", "make test")
    assert argv == ["run-m1", "--in", "/tmp/x", "the prompt; rm -rf /", "make test"]


@pytest.mark.parametrize("data,message", [
    ({"name": "a"}, "`model` is required"),
    ({"name": "a", "kind": "robot"}, "`kind` is"),
    ({"name": "a", "kind": "command"}, "`command` is required"),
    ({"name": "a", "model": "x", "tools": "write"}, "`tools`"),
    ({"name": "a", "model": "x", "max_steps": 0}, "max_steps"),
    ({"name": "a", "model": "x", "colour": "red"}, "unknown key"),
    ({"name": "a", "kind": "command", "command": "x", "parse": "yaml"}, "`parse`"),
    ({"name": "a", "kind": "command", "command": "x", "timeout_s": -1}, "timeout_s"),
    ({"name": "../../x", "model": "x"}, "needs a `name`"),
])
def test_bad_contestants_are_one_line(data, message):
    with pytest.raises(OrchError, match=message):
        parse_contestant(data, "contestant 1")


def test_a_trial_folder_from_a_snapshot_is_a_working_repository():
    t = task(id="a/../b", verify="true", files={"src/x.py": "X = 1\n", "run.sh": "echo\n"})
    root = T.make_folder(t)
    try:
        state = T.snapshot(root)
    finally:
        T.remove_folder(root)
    first, second = T.materialize(state, "orch-bench-x-"), T.materialize(state, "orch-bench-x-")
    try:
        (first / "src" / "x.py").write_text("X = 2\n")  # one trial's edit stays its own
        assert (second / "src" / "x.py").read_text() == "X = 1\n"
        status = subprocess.run(["git", "status", "--porcelain"], cwd=second,
                                capture_output=True, text=True, check=True).stdout
        assert status == ""
        diff = subprocess.run(["git", "diff", "--stat"], cwd=first, capture_output=True,
                              text=True, check=True).stdout
        assert "src/x.py" in diff
    finally:
        T.remove_folder(first)
        T.remove_folder(second)


def test_a_check_that_hangs_is_killed_with_its_children():
    t = task(verify="sleep 30 & sleep 30", check_timeout_s=0.5)  # a child holds the pipe
    folder = T.make_folder(t)
    try:
        passed, output, error = T.grade(t, "x", folder, UNCONFINED)
    finally:
        T.remove_folder(folder)
    assert passed is False and error == "the check ran past its 0.5 s limit"


def test_bench_ids_carry_as_many_random_bits_as_wave_ids():
    from orchestrator.bakeoff.run import new_bench_id

    ids = {new_bench_id() for _ in range(2000)}  # made within the same second or two
    assert len(ids) == 2000
    assert all(len(i.rsplit("-", 1)[1]) == 16 for i in ids)  # 8 random bytes, hex


def test_a_catastrophic_regex_ends_the_check_not_the_bench():
    """A pattern that backtracks for ever (on a model's answer) is stopped at the check's
    limit and excludes the trial; before, `re` would have held the bench for good."""
    t = task(expect={"regex": r"(a|aa)+$"}, check_timeout_s=0.3)
    passed, output, error = T.grade(t, "a" * 60 + "!", None, UNCONFINED)
    assert passed is False and error == ("the check could not grade it: its regex ran past "
                                         "0.3 s")
    assert T.grade(t, "aaaa", None, UNCONFINED) == (True, "all expectations hold", None)


@pytest.mark.parametrize("pattern", ["(unclosed", "*x", 42])
def test_an_invalid_regex_is_refused_when_the_task_is_read(pattern):
    with pytest.raises(OrchError, match=r"`expect.regex` is not a valid pattern .*; fix it"):
        task(expect={"regex": pattern})


def test_a_python_check_over_its_memory_limit_is_an_error_not_a_no(tmp_path):
    (tmp_path / "bench_check_greedy.py").write_text(
        "def greedy(answer):\n    return len(bytearray(1 << 30)) > 0\n")
    (tmp_path / "t.toml").write_text('id = "t"\ntask = "n"\n[expect]\n'
                                     'python = "bench_check_greedy:greedy"\n')
    t = T.load_tasks(tmp_path)[0]
    passed, _, error = T.grade(t, "x", None, Guard(bwrap=None, check_memory_mb=256))
    assert passed is False and error == "the check could not grade it: MemoryError: "
    assert T.grade(t, "x", None, Guard(bwrap=None, check_memory_mb=2048)).passed
