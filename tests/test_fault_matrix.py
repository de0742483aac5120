"""The fault-injection matrix: every file a wave writes, and the ledger append, fail in turn
with ENOSPC, EACCES, EIO and a serialisation error. Whatever fails, the other legs complete,
every billed request is exactly one ledger row or one outbox line, wave.json is final and
the exit code follows the rules (a record left incomplete is exit 2, never a clean 0)."""

from __future__ import annotations

import errno
import json
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import exc as sa_exc

from orchestrator.ledger import outbox
from orchestrator.ledger.spend import Ledger, default_url
from orchestrator.testing.scripted_server import Reply

LEGS = ["m1", "m2", "m3"]
TARGET = 2  # the leg whose files (or ledger row) fail

ERRORS = {
    "ENOSPC": lambda: OSError(errno.ENOSPC, "No space left on device"),
    "EACCES": lambda: PermissionError(errno.EACCES, "Permission denied"),
    "EIO": lambda: OSError(errno.EIO, "Input/output error"),
    "serialisation": lambda: ValueError("Circular reference detected"),
}
# What SQLite says for each (the ledger append's own failures).
LEDGER_ERRORS = {
    "ENOSPC": "database or disk is full",
    "EACCES": "attempt to write a readonly database",
    "EIO": "disk I/O error",
}
SITES = ["leg directory", "metadata.json write", "metadata.json rename",
         "conversation.jsonl", "briefing.md", "wave.json (start)", "wave.json (final, once)",
         "ledger append"]


def _is_target(path: Path, wave_id: list[str]) -> bool:
    return bool(wave_id) and f"{wave_id[0]}-{TARGET}" in str(path)


def inject(monkeypatch, site: str, error: str, wave_id: list[str]) -> None:
    """Make ``site`` fail with ``error`` (for the target leg where the site is a leg's)."""
    from orchestrator import store
    from orchestrator.engine import wave as wave_mod

    make = ERRORS[error]
    if site == "leg directory":
        real_mkdir = Path.mkdir

        def mkdir(self, *args, **kwargs):
            if self.name == f"{wave_id[0]}-{TARGET}" if wave_id else False:
                raise make()
            return real_mkdir(self, *args, **kwargs)

        monkeypatch.setattr(Path, "mkdir", mkdir)
    elif site == "metadata.json write":
        real = store._write_tmp

        def write_tmp(path, *args, **kwargs):
            if path.name == "metadata.json" and _is_target(path, wave_id):
                raise make()
            return real(path, *args, **kwargs)

        monkeypatch.setattr(store, "_write_tmp", write_tmp)
    elif site == "metadata.json rename":
        real_rename = store._rename

        def rename(tmp, path):
            if path.name == "metadata.json" and _is_target(path, wave_id):
                store._unlink(tmp)
                raise make()
            return real_rename(tmp, path)

        monkeypatch.setattr(store, "_rename", rename)
    elif site == "conversation.jsonl":
        real_append = store.JsonlFile.append

        def append(self, record):
            if _is_target(self.path, wave_id):
                raise make()
            return real_append(self, record)

        monkeypatch.setattr(store.JsonlFile, "append", append)
    elif site == "briefing.md":
        real_text = wave_mod.write_text_atomic

        def write_text_atomic(path, *args, **kwargs):
            if path.name == "briefing.md":
                raise make()
            return real_text(path, *args, **kwargs)

        monkeypatch.setattr(wave_mod, "write_text_atomic", write_text_atomic)
    elif site == "wave.json (start)":
        real_start = wave_mod.write_json_atomic

        def write_start(path, data):
            if path.name == "wave.json" and data.get("status") == "running":
                raise make()
            return real_start(path, data)

        monkeypatch.setattr(wave_mod, "write_json_atomic", write_start)
    elif site == "wave.json (final, once)":
        real_write = wave_mod.write_json_atomic
        calls = []

        def write_json_atomic(path, data):
            calls.append(path)
            if path.name == "wave.json" and data.get("status") != "running" and \
                    len([c for c in calls if c.name == "wave.json"]) == 2:
                raise make()
            return real_write(path, data)

        monkeypatch.setattr(wave_mod, "write_json_atomic", write_json_atomic)
    elif site == "ledger append":
        real_many = Ledger.append_many

        def append_many(self, rows, **kwargs):
            if any(str(r.get("leg_id", "")).endswith(f"-{TARGET}") for r in rows):
                if error == "serialisation":
                    raise TypeError("Object of type Decimal is not JSON serializable")
                import sqlite3 as _sqlite3

                raise sa_exc.OperationalError("INSERT INTO spend", {},
                                              _sqlite3.OperationalError(LEDGER_ERRORS[error]))
            return real_many(self, rows, **kwargs)

        monkeypatch.setattr(Ledger, "append_many", append_many)


def capture_wave_id(monkeypatch) -> list[str]:
    """The wave's id as soon as it is made, so faults can aim at its legs."""
    from orchestrator.engine import wave as wave_mod

    seen: list[str] = []
    real = wave_mod.new_wave_id

    def new_wave_id():
        seen.append(real())
        return seen[-1]

    monkeypatch.setattr(wave_mod, "new_wave_id", new_wave_id)
    return seen


def rows_everywhere(home: Path) -> list[str]:
    """leg_id of every ledger row, and of every leg the outbox holds lines of and the ledger
    lacks: each leg once. (A leg's lines — its row in flight, then its end — make one row
    when replayed, and a line behind the row the ledger holds changes nothing.)"""
    ids = []
    db = home / "ledger.db"
    if db.exists():
        ids += [r[0] for r in sqlite3.connect(db).execute("select leg_id from spend")]
    for path in outbox.locations(default_url()):
        if path.exists():
            ids += sorted({json.loads(x)["row"]["leg_id"] for x in path.read_text().splitlines()}
                          - set(ids))
    return ids


@pytest.mark.parametrize("error", list(ERRORS))
@pytest.mark.parametrize("site", SITES)
def test_one_fault_stays_in_its_place(orch, scripted_server, orch_home, monkeypatch, site,
                                      error):
    from orchestrator.runtime import litellm

    litellm()
    orch.provider()
    for n, name in enumerate(LEGS):
        scripted_server.script(name, Reply(text=f"answer {n}", latency=0.05 * n))
    wave_id = capture_wave_id(monkeypatch)
    inject(monkeypatch, site, error, wave_id)
    run = orch.run_wave(LEGS)
    doc = run.doc

    # every leg answered: one fault touches no other leg (nor its own answer)
    assert [leg["status"] for leg in doc["legs"]] == ["complete"] * 3, doc["legs"]
    assert scripted_server.count() == 3
    # each billed request is exactly one ledger row or one outbox line
    assert sorted(rows_everywhere(orch_home)) == sorted(leg["leg_id"] for leg in doc["legs"])
    # wave.json is final, and it is the document the run returned
    on_disk = json.loads((orch_home / "runs" / doc["wave_id"] / "wave.json").read_text())
    assert on_disk["status"] == "complete" and on_disk["exit_code"] == doc["exit_code"]
    target = doc["legs"][TARGET - 1]
    others = [leg for n, leg in enumerate(doc["legs"], 1) if n != TARGET]
    assert all(not leg.get("io_errors") for leg in others)

    if site == "ledger append":  # the row is safe in the outbox: nothing is lost
        assert "ledger_outbox" in target and doc["exit_code"] == 0
        assert any("wait in the outbox" in n for n in doc["notices"])
    elif site.startswith("wave.json"):  # the final write (retried) makes it whole
        assert doc["exit_code"] == 0
    elif site == "briefing.md":  # the wave's own artifact is incomplete
        assert doc["exit_code"] == 2
        assert any(n.startswith("artifacts incomplete: briefing.md") for n in doc["notices"])
    else:  # the target leg's files are incomplete, said on the leg, exit 2
        assert doc["exit_code"] == 2
        said = " ".join(target["io_errors"])
        words = {"ENOSPC": "No space left on device", "EACCES": "Permission denied",
                 "EIO": "Input/output error", "serialisation": "Circular reference"}[error]
        assert words in said, said
        assert doc["artifact_errors"] and all(e.startswith(target["leg_id"])
                                              for e in doc["artifact_errors"])
    if site == "conversation.jsonl" or site == "leg directory":
        path = orch_home / "runs" / target["leg_id"] / "conversation.jsonl"
        assert not path.exists() or all(json.loads(x) for x in path.read_text().splitlines())


def test_a_plugin_value_json_cannot_hold_is_recorded_not_fatal(orch, scripted_server,
                                                               orch_home):
    """A plugin's leg.set() with a value that cannot be serialised: the leg and the wave
    carry on, the value is replaced by a note, metadata.json and wave.json are written."""
    from orchestrator.hookspecs import hookimpl

    class Loopy:
        @hookimpl
        def leg_start(self, leg):
            if leg.leg_id.endswith("-2"):
                loop: list = []
                loop.append(loop)
                leg.set("loopy", loop)

    run = orch.run_wave(LEGS, plugins=[("loopy", Loopy())])
    doc = run.doc
    assert [leg["status"] for leg in doc["legs"]] == ["complete"] * 3
    target = doc["legs"][1]
    assert target["loopy"].startswith("<not serialisable: list")
    assert any("metadata.json: RecursionError" in e or "Circular reference" in e
               for e in target["io_errors"])
    meta = json.loads((orch_home / "runs" / target["leg_id"] / "metadata.json").read_text())
    assert meta["status"] == "complete" and meta["loopy"].startswith("<not serialisable")
    assert doc["exit_code"] == 2


def test_a_wave_json_that_cannot_be_written_at_the_end_is_said_and_exits_2(
        orch, scripted_server, orch_home, monkeypatch, capsys):
    from orchestrator.engine import wave as wave_mod

    real_write = wave_mod.write_json_atomic

    def write_json_atomic(path, data):
        if path.name == "wave.json" and data.get("status") != "running":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(path, data)

    monkeypatch.setattr(wave_mod, "write_json_atomic", write_json_atomic)
    run = orch.run_wave(LEGS)
    assert [leg["status"] for leg in run.legs] == ["complete"] * 3
    assert run.doc["exit_code"] == 2
    assert any("wave.json could not be written" in n for n in run.doc["notices"])
    # the face says the document's notices on stderr (tests/test_messages.py), not the engine
    assert len(rows_everywhere(orch_home)) == 3
