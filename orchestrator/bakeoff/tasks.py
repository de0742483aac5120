"""Tasks: loading a folder of TOML/JSON task files, a fresh trial folder, the hidden check.

A folder may hold ``_files.toml`` (or ``.json``): files every task in it starts with (a small
code base several reading tasks share). Files whose names start with ``_`` are not tasks.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, NamedTuple

from orchestrator.errors import OrchError
from orchestrator.security.capped import cap

if TYPE_CHECKING:
    from orchestrator.bakeoff.guard import Guard

EXPECT_KINDS = ("contains", "regex", "equals", "json_schema", "python")
CHILD_KINDS = ("python",)  # someone's code: in a child process (a regex has a timeout)
CHECK_OUTPUT_KEEP = 2000  # characters of a check's output kept (its end)
SUITES_DIR = Path(__file__).parent / "suites"
ANSWER_ENV = "ORCH_BENCH_ANSWER"
# what `git gc` leaves that a one-commit start state does not need (reflogs of that one
# commit, the commit graph, dumb-server info): fewer files to write and remove per trial
_GIT_EXTRAS = ("COMMIT_EDITMSG", "info", "logs", "objects/info", "refs/tags")
_GIT_ENV = {"GIT_AUTHOR_NAME": "orch bench", "GIT_AUTHOR_EMAIL": "bench@orch.invalid",
            "GIT_COMMITTER_NAME": "orch bench", "GIT_COMMITTER_EMAIL": "bench@orch.invalid",
            "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


@dataclass
class Task:
    id: str
    text: str
    files: dict[str, str]
    verify: str | None = None
    expect: dict[str, Any] = field(default_factory=dict)
    solution_answer: str = ""
    solution_files: dict[str, str] = field(default_factory=dict)
    git_init: bool = True
    folder: Path | None = None
    check_timeout_s: float | None = None  # None: the bench's
    network: bool = False  # the `verify` command may use the network

    @property
    def check(self) -> str:
        """The hidden check in words (for `{verify}` and the report)."""
        return self.verify or json.dumps(self.expect, sort_keys=True)


def builtin_suites() -> list[str]:
    return sorted(p.name for p in SUITES_DIR.iterdir() if p.is_dir() and p.name[0] != "_")


def suite_dir(name: str) -> Path:
    if name not in builtin_suites():
        raise OrchError(f"no built-in suite {name!r}; choose one of "
                        f"{', '.join(builtin_suites())}")
    return SUITES_DIR / name


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
        return tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise OrchError(f"task file {path} cannot be read: {str(exc).splitlines()[0]}; fix "
                        "its TOML/JSON") from None


def _files(value: Any, where: Path) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise OrchError(f"{where}: `files` must map relative paths to text")
    for name in value:
        parts = PurePosixPath(name).parts
        if not name or name.startswith("/") or ".." in parts or "\\" in name or "\0" in name:
            raise OrchError(f"{where}: file path {name!r} must be relative and stay inside "
                            "the trial folder")
    return dict(value)


def load_task(path: Path, shared: dict[str, str] | None = None) -> Task:
    return load_task_data(_read(path), path, shared)


def load_task_data(data: Any, path: Path | str = "<task>",
                   shared: dict[str, str] | None = None) -> Task:
    """A task from its parsed TOML/JSON; ``path`` names it in errors."""
    path = Path(path)
    if not isinstance(data, dict):
        raise OrchError(f"{path}: a task file holds one table/object")
    for key in ("id", "task"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise OrchError(f"{path}: `{key}` is required (a non-empty string)")
    verify, expect = data.get("verify"), data.get("expect") or {}
    if bool(verify) == bool(expect):
        raise OrchError(f"{path}: give exactly one check, `verify = \"COMMAND\"` or an "
                        "`[expect]` table")
    if verify is not None and not isinstance(verify, str):
        raise OrchError(f"{path}: `verify` is a shell command (a string)")
    if not isinstance(expect, dict) or (bad := set(expect) - set(EXPECT_KINDS)):
        raise OrchError(f"{path}: unknown expect kind(s) {sorted(bad or [])}; use "
                        f"{', '.join(EXPECT_KINDS)}")
    if "regex" in expect:
        _check_regex(expect["regex"], path)
    timeout = data.get("check_timeout_s")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)
                                or not 0 < timeout <= 86400):
        raise OrchError(f"{path}: `check_timeout_s` is a number of seconds from 0 to 86400")
    if not isinstance(data.get("network", False), bool):
        raise OrchError(f"{path}: `network` is true or false")
    solution = data.get("solution", "")
    if isinstance(solution, str):
        answer, sol_files = solution, {}
    elif isinstance(solution, dict):
        answer, sol_files = str(solution.get("answer", "")), _files(solution.get("files", {}),
                                                                   path)
    else:
        raise OrchError(f"{path}: `solution` is a string or a table with answer/files")
    return Task(id=data["id"], text=data["task"],
                files={**(shared or {}), **_files(data.get("files", {}), path)},
                verify=verify, expect=expect, solution_answer=answer, solution_files=sol_files,
                git_init=bool(data.get("git_init", True)),
                check_timeout_s=float(timeout) if timeout is not None else None,
                network=data.get("network", False),
                folder=path.parent if path.name != "<task>" else None)


def _check_regex(pattern: Any, path: Path) -> None:
    import regex

    try:
        if not isinstance(pattern, str):
            raise TypeError("not a string")
        regex.compile(pattern, regex.M | regex.V0)
    except (regex.error, TypeError) as exc:
        raise OrchError(f"{path}: `expect.regex` is not a valid pattern ({exc}); fix it "
                        "(Python regular expression syntax)") from None


def load_tasks(folder: Path) -> list[Task]:
    """Every task file in ``folder``, sorted by id; ids must be unique."""
    if not folder.is_dir():
        raise OrchError(f"task folder {folder} is not a directory; pass --cases DIR or "
                        "--builtin NAME")
    shared: dict[str, str] = {}
    for name in ("_files.toml", "_files.json"):
        if (folder / name).is_file():
            shared = _files(_read(folder / name).get("files", {}), folder / name)
    tasks = [load_task(p, shared) for p in sorted(folder.iterdir())
             if p.suffix in (".toml", ".json") and not p.name.startswith("_") and p.is_file()]
    if not tasks:
        raise OrchError(f"no task files (*.toml, *.json) in {folder}")
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise OrchError(f"task id {task.id!r} appears twice in {folder}; ids are unique")
        seen.add(task.id)
    return sorted(tasks, key=lambda t: t.id)


# --- trial folders -------------------------------------------------------------------------

def make_folder(task: Task, parent: Path | None = None) -> Path:
    """A fresh temporary folder with the task's files, committed to a new git repository
    (packed and lean: a dozen entries to copy per trial, not one per object)."""
    root = Path(tempfile.mkdtemp(prefix=f"orch-bench-{slug(task.id)}-", dir=parent))
    try:
        write_files(root, task.files)
        if task.git_init:
            for args in (["init", "-q", "--template="], ["add", "-A"],
                         ["commit", "-q", "--allow-empty", "-m", "start state"],
                         ["gc", "-q", "--prune=now"]):
                subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                               env={**os.environ, **_GIT_ENV}, timeout=60)
            for extra in _GIT_EXTRAS:
                path = root / ".git" / extra
                if path.is_dir():
                    shutil.rmtree(path)
                elif path.exists():
                    path.unlink()
    except BaseException:
        remove_folder(root)
        raise
    return root


def start_key(task: Task) -> tuple[bool, tuple[tuple[str, str], ...]]:
    """What a task's start state depends on: tasks with equal keys start identically."""
    return task.git_init, tuple(sorted(task.files.items()))


Snapshot = list[tuple[str, bytes | None, int]]  # (relative path, content or None = dir, mode)


def snapshot(root: Path) -> Snapshot:
    """A prepared start state read into memory once per task, parents before children."""
    out: Snapshot = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(dirpath)
        rel = base.relative_to(root).as_posix()
        if rel != ".":
            out.append((rel, None, base.stat().st_mode & 0o777))
        for name in sorted(filenames):
            path = base / name
            out.append(((base / name).relative_to(root).as_posix(), path.read_bytes(),
                        path.stat().st_mode & 0o777))
    return out


def materialize(state: Snapshot, prefix: str) -> Path:
    """A trial's fresh folder from a snapshot: one write per file, nothing else."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    for rel, content, mode in state:
        if content is None:
            os.mkdir(root / rel, mode | 0o700)
        else:
            fd = os.open(root / rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode | 0o600)
            try:
                view = memoryview(content)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
    return root


def write_files(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def remove_folder(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:40]


# --- the hidden check ----------------------------------------------------------------------

class Verdict(NamedTuple):
    """A check's answer. ``error``: it could not grade (it hung, exited, crashed, was
    killed): the trial is excluded, never counted as a failure."""

    passed: bool
    output: str
    error: str | None = None


def grade(task: Task, answer: str, folder: Path | None, guard: Guard) -> Verdict:
    """``verify`` runs in ``folder`` with the answer in the file named by $ORCH_BENCH_ANSWER,
    confined; ``expect`` looks at the answer alone, in a child process when it runs someone's
    code or a regex. Blocking: call it in a worker thread."""
    if task.verify:
        return _verify(task, answer, folder, guard)
    spec = task.expect
    if any(kind in spec for kind in CHILD_KINDS):
        reply = guard.python({"op": "expect", "expect": spec, "answer": answer or "",
                              "folder": str(task.folder) if task.folder else None},
                             task.check_timeout_s or guard.check_timeout_s)
        if "error" in reply:
            return Verdict(False, "", f"the check could not grade it: {reply['error']}")
        return Verdict(bool(reply["passed"]), str(reply["output"]))
    limit = task.check_timeout_s or guard.check_timeout_s
    try:
        failures = expect_failures(spec, answer or "", limit)
    except TimeoutError:
        return Verdict(False, "", f"the check could not grade it: its regex ran past {limit:g} s")
    return Verdict(not failures, "; ".join(failures) or "all expectations hold")


def _verify(task: Task, answer: str, folder: Path | None, guard: Guard) -> Verdict:
    from orchestrator.sandbox.process import run

    if folder is None:
        return Verdict(False, "no trial folder")
    with tempfile.NamedTemporaryFile("w", suffix=".answer", delete=False,
                                     encoding="utf-8") as fh:
        fh.write(answer or "")
    answer_file = Path(fh.name)
    limit = task.check_timeout_s or guard.check_timeout_s
    try:
        argv = guard.command(["/bin/sh", "-c", task.verify], cwd=folder,
                             readable=(answer_file,), network=task.network)
        done = run(argv, cwd=folder, env={**guard.env(), ANSWER_ENV: str(answer_file)},
                   limits=guard.check_limits(limit), running=guard.running,
                   reap=guard.reaps)
    finally:
        answer_file.unlink(missing_ok=True)
    text = (done.stdout.text() + done.stderr.text()).strip()
    said = f": {cap(text, CHECK_OUTPUT_KEEP, tail=True)}" if text else ""
    if done.error or done.sandbox_failed():
        return Verdict(False, "", "the check could not start: "
                       f"{done.error or done.sandbox_failed()}")
    if done.interrupted:
        return Verdict(False, "", "interrupted")
    if done.timed_out:
        return Verdict(False, said[2:], f"the check ran past its {limit:g} s limit")
    if done.killed_by:
        return Verdict(False, said[2:], f"the check was killed by {done.killed_by}")
    return Verdict(done.exit_code == 0, f"exit {done.exit_code}{said}")


def json_of(answer: str) -> Any:
    """The answer as JSON: the whole text, or the first fenced block."""
    fenced = re.search(r"```(?:json)?\s*\n(.*?)```", answer, re.S)
    return json.loads(fenced.group(1) if fenced else answer.strip())


def expect_failures(spec: dict[str, Any], answer: str,
                    regex_timeout_s: float | None = None) -> list[str]:
    """What the answer misses of the ``[expect]`` table (nothing: it passes). A regex that
    runs past ``regex_timeout_s`` (catastrophic backtracking) raises TimeoutError."""
    import regex

    failures = []
    if "contains" in spec:
        wanted = spec["contains"] if isinstance(spec["contains"], list) else [spec["contains"]]
        failures += [f"missing {w!r}" for w in wanted if str(w) not in answer]
    if "regex" in spec and not regex.search(spec["regex"], answer, regex.M | regex.V0,
                                            timeout=regex_timeout_s, concurrent=True):
        failures.append(f"no match for /{spec['regex']}/")
    if "equals" in spec and answer.strip() != str(spec["equals"]).strip():
        failures.append(f"not equal to {str(spec['equals']).strip()!r}")
    if "json_schema" in spec:
        failures += _schema(spec["json_schema"], answer)
    if "python" in spec:
        failures += _python(spec["python"], answer)
    return failures


def _schema(schema: dict, answer: str) -> list[str]:
    import jsonschema

    try:
        value = json_of(answer)
    except ValueError as exc:
        return [f"not JSON: {exc}"]
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema)
                                             .iter_errors(value))
    return [f"schema: {error.message}"] if error else []


def _python(target: str, answer: str) -> list[str]:
    """Run in the child (:mod:`orchestrator.bakeoff.child`), the task's folder on its path."""
    module, _, name = target.partition(":")
    try:
        result = getattr(importlib.import_module(module), name)(answer)
    except (MemoryError, RecursionError):  # not a "no": the check broke (an exclusion)
        raise
    except Exception as exc:  # the check said no by raising: the trial fails, said plainly
        return [f"python check {target} raised {type(exc).__name__}: {exc}"]
    return [] if result else [f"python check {target} said no"]


def selftest(tasks: list[Task], guard: Guard) -> list[dict[str, Any]]:
    """Each check against its solution (must pass) and an empty answer (must fail); a check
    that cannot grade (it hangs, exits, crashes) is a problem too."""
    rows = []
    for task in tasks:
        row: dict[str, Any] = {"task": task.id}
        errors: list[str | None] = []
        for label, answer, files in (("solution", task.solution_answer, task.solution_files),
                                     ("empty", "", {})):
            folder = make_folder(task) if task.verify else None
            try:
                if folder is not None:
                    write_files(folder, files)
                verdict = grade(task, answer, folder, guard)
                row[label] = verdict.passed
                row[f"{label}_output"] = verdict.error or verdict.output
                errors.append(verdict.error)
            finally:
                if folder is not None:
                    remove_folder(folder)
        error = next((e for e in errors if e), None)
        row["ok"] = row["solution"] and not row["empty"] and error is None
        row["problem"] = None if row["ok"] else (
            error if error else "the solution fails its own check" if not row["solution"]
            else "the check cannot fail: an empty answer passes")
        rows.append(row)
    return rows
