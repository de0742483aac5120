"""What the terminal shows of a streaming leg: a single-leg ``orch fanout`` prints the text
on stdout as it arrives (once through the real ``orch``), each write through the outlet (an
escape split across two pieces stays text, a key split across two is masked whole),
``--json`` prints no streamed text, and the live table counts a leg's tokens as they come."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.testing.scripted_server import Reply

ORCH = str(Path(sys.executable).parent / "orch")


def test_a_single_leg_fanout_prints_its_text_before_the_leg_ends(orch, scripted_server,
                                                                  orch_home, tmp_path):
    orch.provider()
    # 12 words, 0.4 s apart: the leg runs ~5 s after its first word
    words = " ".join(f"word{i}" for i in range(12))
    scripted_server.script("m", Reply(text=words, chunk_delay=0.4))
    env = dict(os.environ, ORCH_HOME=str(orch_home), ORCH_DAEMON="off")
    proc = subprocess.Popen([ORCH, "fanout", "-m", "scripted/m", "--tools", "none",
                             "--no-validate-models", "say words"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                            env=env)
    try:
        first = b""
        while b"word0" not in first:  # read stdout as it comes, not at the end
            piece = os.read(proc.stdout.fileno(), 64)
            assert piece, "stdout closed before any text: " + proc.stderr.read().decode()
            first += piece
        running_when_seen = proc.poll() is None
        served = scripted_server.requests[0].t_end
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert running_when_seen and served is None  # the answer was still streaming
    stdout = (first + out).decode()
    assert stdout.startswith(words)  # the text first, as it came
    assert "\n== scripted/m (" in stdout and stdout.count(words) == 1  # then its head
    assert proc.returncode == 0, err.decode()


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


def _echoed(pieces: list[str]) -> str:
    """What the outlet-wrapped stdout shows for ``pieces`` streamed to one leg."""
    from orchestrator.cli.echo import TextEcho
    from orchestrator.security.scrubbed_io import ScrubbedStream

    out = io.StringIO()
    saved = sys.stdout
    sys.stdout = ScrubbedStream(out)
    try:
        echo = TextEcho()
        for piece in pieces:
            echo("leg-1", piece)
        echo.close()
    finally:
        sys.stdout = saved
    return out.getvalue()


def test_an_escape_split_across_two_pieces_stays_inert():
    shown = _echoed(["Hello \x1b", "[2J world \x1b]52;c;", "ZXZpbA==\x07 done"])
    assert "\x1b" not in shown and "\x07" not in shown
    assert shown == "Hello \\x1b[2J world \\x1b]52;c;ZXZpbA==\\x07 done\n"


def test_a_key_split_across_two_pieces_is_masked_whole():
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
    shown = _echoed(["the key is ", key[:12], key[12:], " ok"])
    assert key not in shown and key[12:] not in shown
    assert shown.startswith("the key is ") and shown.endswith(" ok\n")


def test_only_the_first_leg_is_echoed():
    shown = _echoed(["one ", "two "])
    assert shown == "one two \n"
    from orchestrator.cli.echo import TextEcho

    echo = TextEcho()
    echo.leg_id = "leg-1"
    echo("leg-2", "not mine ")
    assert echo.text == ""


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


@pytest.mark.usefixtures("both_ways")
def test_the_streamed_text_reaches_stdout_in_process_and_through_the_daemon(orch,
                                                                            scripted_server):
    """The daemon relays each LegText to its client as a JSON frame (events.from_dict knows
    ``text``): a single-leg run prints its answer from the pieces either way."""
    from orchestrator.testing.daemon import invoke

    orch.provider()
    scripted_server.script("m", Reply(text="streamed through \x1b[2J the relay"))
    result = invoke(["fanout", "-m", "scripted/m", "--tools", "none",
                     "--no-validate-models", "-p", "q"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("streamed through \\x1b[2J the relay\n== scripted/m (")
    assert result.stdout.count("the relay") == 1


def test_a_reader_that_leaves_ends_the_echo_not_the_run():
    from orchestrator.cli.echo import TextEcho

    class Closed(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    saved = sys.stdout
    sys.stdout = Closed()
    try:
        echo = TextEcho()
        echo("leg-1", "one two ")
        echo("leg-1", "three ")  # no second attempt, no error
        echo.close()
    finally:
        sys.stdout = saved
    assert echo.gone and echo.text == "one two three "
