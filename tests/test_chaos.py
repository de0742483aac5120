"""The chaos test: a 50-leg wave where each leg draws one fault at random (seeded). Every leg
ends with a status and a reason, nothing billed is lost, and the wave ends on time."""

from __future__ import annotations

import errno
import json
import random
import sqlite3
from datetime import datetime
from pathlib import Path

from orchestrator.ledger import outbox
from orchestrator.ledger.spend import default_url
from orchestrator.testing.scripted_server import Reply

SEED = 12
LEGS = 50
TIMEOUT_S = 4.0
FAULTS = {
    "none": (Reply(text="fine"),),
    "500": (Reply(status=500),),
    "429": (Reply(status=429, retry_after=0.2), Reply(text="after a wait")),
    "hang": (Reply(hang=True),),
    "drop": (Reply(drop=True),),
    "garbage": (Reply(body="<html>bad gateway</html>"),),
    "no choices": (Reply(body={"choices": []}),),
    "disk": (Reply(text="fine, but my files fail"),),
}
EXPECTED = {  # what each fault may end as: (status, reason prefix)
    "none": {("complete", None)},
    "500": {("error", "server_error")},
    "429": {("complete", None), ("error", "rate_limited"), ("error", "timeout")},
    "hang": {("error", "timeout")},
    "drop": {("error", "connection")},
    "garbage": {("error", "bad_response")},
    "no choices": {("error", "bad_response")},
    "disk": {("complete", None)},
}


def test_fifty_legs_fifty_faults(orch, scripted_server, orch_home, monkeypatch):
    from orchestrator import store
    from orchestrator.runtime import litellm

    litellm()  # imported before the clock starts, as orch fanout does
    rng = random.Random(SEED)
    drawn = [rng.choice(list(FAULTS)) for _ in range(LEGS)]
    assert set(drawn) == set(FAULTS)  # the seed draws every fault at least once
    orch.provider()
    for n, fault in enumerate(drawn, 1):
        scripted_server.script(f"m{n}", *FAULTS[fault])
    disk_legs = {f"-{n}" for n, fault in enumerate(drawn, 1) if fault == "disk"}

    def broken(path: Path) -> bool:
        return any(path.parent.name.endswith(suffix) or path.name.endswith(suffix)
                   for suffix in disk_legs) and "runs" in str(path)

    real_tmp, real_append = store._write_tmp, store.JsonlFile.append

    def write_tmp(path, *args, **kwargs):
        if broken(path):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_tmp(path, *args, **kwargs)

    def append(self, record):
        if broken(self.path):
            raise OSError(errno.EIO, "Input/output error")
        return real_append(self, record)

    monkeypatch.setattr(store, "_write_tmp", write_tmp)
    monkeypatch.setattr(store.JsonlFile, "append", append)

    run = orch.run_wave([f"m{n}" for n in range(1, LEGS + 1)], timeout_s=TIMEOUT_S,
                        max_steps=2)
    doc = run.doc
    for fault, leg in zip(drawn, doc["legs"], strict=True):
        prefix = leg["reason"].split(":")[0] if leg["reason"] else None
        assert (leg["status"], prefix) in EXPECTED[fault], (fault, leg["status"], leg["reason"])
        assert "Traceback" not in (leg["reason"] or "")
        if fault == "disk":
            assert any("No space left" in e or "Input/output" in e for e in leg["io_errors"])
    # nothing billed is lost: every leg is one ledger row or one outbox line
    ids = [r[0] for r in sqlite3.connect(orch_home / "ledger.db").execute(
        "select leg_id from spend")]
    for path in outbox.locations(default_url()):
        if path.exists():
            ids += [json.loads(x)["row"]["leg_id"] for x in path.read_text().splitlines()]
    assert sorted(ids) == sorted(leg["leg_id"] for leg in doc["legs"])
    # the rows carry what the legs were billed
    billed = {leg["leg_id"]: leg["usage"]["input_tokens"] for leg in doc["legs"]}
    rows = dict(sqlite3.connect(orch_home / "ledger.db").execute(
        "select leg_id, input_tokens from spend"))
    assert rows == billed
    # wave.json is final and the wave ended on time
    on_disk = json.loads((orch_home / "runs" / doc["wave_id"] / "wave.json").read_text())
    assert on_disk["status"] == doc["status"] == "partial" and on_disk["exit_code"] == 2
    took = (datetime.fromisoformat(doc["ended_at"])
            - datetime.fromisoformat(doc["created_at"])).total_seconds()
    assert took <= TIMEOUT_S + 2, took
