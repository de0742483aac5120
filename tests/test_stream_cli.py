"""What the terminal shows of a streaming leg: a single-leg ``orch fanout`` on a terminal
shows the text of its step in progress under the live table (stderr) as it arrives, a tool
step's too, and stdout carries the final answer only, as in a pipe (once through the real
``orch``); ``--json`` prints no streamed text, and the live table counts a leg's tokens."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

ORCH = str(Path(sys.executable).parent / "orch")


def _pty_run(args, env, cwd, until: bytes):
    """``orch ARGS`` with stderr on a terminal (a pty, 40 rows of 100) and stdout a pipe:
    (what the terminal showed before ``until`` appeared on it, whether the process still ran
    then, stdout, the terminal's whole output, exit code)."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    proc = subprocess.Popen([ORCH, *args], stdout=subprocess.PIPE, stderr=slave,
                            stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    os.close(slave)
    shown, running_then = b"", None
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 60)
            assert ready, "the terminal showed nothing for 60 s: " + shown.decode(
                errors="replace")
            try:
                piece = os.read(master, 4096)
            except OSError:  # the process closed the terminal
                break
            if not piece:
                break
            shown += piece
            if running_then is None and until in shown:
                running_then = proc.poll() is None
        out = proc.stdout.read()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return running_then, out.decode(), shown.decode(errors="replace"), proc.returncode


_HEAD = re.compile(r"== scripted/m \(\S+\) · complete · \d+\+\d+ tok · unknown · \d+\.\ds")


def test_a_single_leg_run_shows_its_text_as_it_streams_and_stdout_is_the_pipes(
        orch, scripted_server, orch_home, tmp_path):
    """On a terminal the one leg's text is shown while it streams, the text of a step that
    ends in tool calls too, under the live table on stderr; stdout carries the final answer
    only, byte for byte what the same run prints into a pipe (once through the real ``orch``)."""
    orch.provider()
    words = " ".join(f"word{i}" for i in range(12))
    def script() -> None:  # a tool step's text (~2 s), then ~5 s of the answer
        scripted_server.script(
            "m", Reply(text="Let me look at the files first.", chunk_delay=0.3,
                       tool_calls=[{"name": "list", "arguments": {}}]),
            Reply(text=words, chunk_delay=0.4))

    script()
    (tmp_path / "notes.txt").write_text("a file to list\n")
    env = dict(os.environ, ORCH_HOME=str(orch_home), ORCH_DAEMON="off", TERM="xterm")
    args = ["fanout", "-m", "scripted/m", "--tools", "read", "--no-validate-models",
            "--workspace", str(tmp_path), "say words"]
    running_then, out, shown, code = _pty_run(args, env, tmp_path, b"word0")
    assert code == 0, shown
    assert running_then  # the text was on the terminal while the leg still ran
    assert scripted_server.chats[0].body["stream"] is True  # watched: it streamed
    assert "Let me look at the" in shown  # the tool step's text was shown as it came
    assert "Let me" not in out and out.count(words) == 1
    # the same run into a pipe: nothing watches, read whole, the same stdout (but the ids,
    # the seconds and the prompt's size, which holds the tool call's id)
    script()
    piped = CliRunner().invoke(cli, args)
    assert piped.exit_code == 0, piped.output
    assert [c.body.get("stream") for c in scripted_server.chats] == [True, True, None, None]
    for stdout in (out, piped.stdout):
        head, rest = stdout.split("\n", 1)
        assert _HEAD.fullmatch(head), head
        assert rest == f"{words}\n\n"


def test_json_output_has_no_streamed_text(orch, scripted_server):
    orch.provider()
    scripted_server.script("m", Reply(text="only inside the document"))
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/m", "--tools", "none",
                                      "--no-validate-models", "--json", "q"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # stdout is the document and nothing else
    assert doc["legs"][0]["answer"] == "only inside the document"


def test_two_legs_print_no_streamed_text(orch, scripted_server):
    orch.provider()
    scripted_server.script("a", Reply(text="alpha answer"))
    scripted_server.script("b", Reply(text="beta answer"))
    result = CliRunner().invoke(cli, ["fanout", "-m", "scripted/a,scripted/b", "--tools",
                                      "none", "--no-validate-models", "q"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("== ")  # the answers under their heads, as before
    assert result.stdout.count("alpha answer") == 1


def test_the_live_table_counts_tokens_as_they_stream(monkeypatch):
    from orchestrator.engine.record import RUNNING, LegRecord
    from orchestrator.progress import LiveProgress
    from orchestrator.request import Usage

    progress = LiveProgress()
    record = LegRecord(leg_id="w-1", wave_id="w", model="scripted/m", provider="scripted")
    record.status = RUNNING
    progress(SimpleNamespace(record=record))

    def cells():
        table = progress._table()
        return [next(iter(c.cells)) for c in table.columns]

    assert cells()[3] == "0+0"
    progress.text("w-1", "x" * 40)  # ~10 tokens so far
    assert cells()[3] == "0+~10"
    progress.text("w-1", "y" * 8)
    assert cells()[3] == "0+~12"
    billed = LegRecord.from_dict(record.to_dict())
    billed.status = RUNNING
    billed.usage = Usage(30, 11)  # the answer billed: the provider's counts replace it
    progress(SimpleNamespace(record=billed))
    assert cells()[3] == "30+11"


def test_the_preview_shows_the_step_in_progress_and_no_tool_steps_text_stays():
    """The one answer's text under the live table: the step in progress, masked and inert a
    whole word at a time; gone when the step's answer is read (a tool step's text is not the
    output; the final answer's goes to stdout at the end)."""
    from orchestrator.engine.record import RUNNING, LegRecord
    from orchestrator.progress import LiveProgress
    from orchestrator.request import Usage

    progress = LiveProgress(preview=True)
    record = LegRecord(leg_id="w-1", wave_id="w", model="scripted/m", provider="scripted")
    record.status = RUNNING
    progress(SimpleNamespace(record=record))

    def tail() -> str:
        shown = progress._tail()
        return "" if shown is None else shown.plain

    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
    for piece in ["Let me look \x1b", "[2J with ", key[:12], key[12:], " first. "]:
        progress.text("w-1", piece)
    assert tail().startswith("Let me look \\x1b[2J with ***") and key[12:] not in tail()
    step = LegRecord.from_dict(record.to_dict())
    step.status, step.steps, step.requests, step.usage = RUNNING, 1, 1, Usage(30, 11)
    progress(SimpleNamespace(record=step))  # the tool step's answer was read
    assert tail() == ""
    progress.text("w-1", "The answer ")
    assert tail() == "The answer "
    progress.text("w-2", "another leg ")  # only the one leg's text is previewed
    assert "another" not in tail()
    done = LegRecord.from_dict(step.to_dict())
    done.status, done.steps, done.requests, done.usage = "complete", 2, 2, Usage(60, 20)
    progress(SimpleNamespace(record=done))
    assert tail() == ""


@pytest.mark.usefixtures("both_ways")
def test_a_single_leg_runs_stdout_is_its_answer_in_process_and_through_the_daemon(
        orch, scripted_server):
    """Into a pipe nothing watches: the leg is read whole and stdout is the head line and
    the answer, in process and through the daemon alike."""
    from orchestrator.testing.daemon import invoke

    orch.provider()
    scripted_server.script("m", Reply(text="answered through \x1b[2J the relay"))
    result = invoke(["fanout", "-m", "scripted/m", "--tools", "none",
                     "--no-validate-models", "-p", "q"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("== scripted/m (")
    assert result.stdout.endswith("answered through \\x1b[2J the relay\n\n")
    assert "stream" not in scripted_server.chats[-1].body
