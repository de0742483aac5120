"""One outlet (issue 38, item 4): every text from a model or a provider printed to a terminal
or a log line is made inert, on a terminal and piped. An answer holding OSC 52 (the
clipboard), OSC 0 (the window title), ``\\r`` + erase-line forging "all tests passed", U+009B
and a bidi override, and a provider error body clearing the screen in the ``Reason:`` line,
through the real ``orch`` entry point: printed escaped; the answer file keeps the exact bytes;
``--json`` keeps them as JSON escapes. And a walk of the code: nothing reaches the terminal
another way."""

from __future__ import annotations

import ast
import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.security.outlet import _UNSAFE, inert
from orchestrator.testing.scripted_server import Reply

ROOT = Path(__file__).resolve().parent.parent
FORGED = ("tests: 3 failed\r\x1b[2Kall tests passed\n"
          "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b]0;pwned\x07"
          "\u202eevil\u202c \x9b2J \x1bP1$r\x1b\\ done")
RAW = ["\x1b]52", "\x1b]0;", "\r\x1b[2Kall tests passed", "\x9b", "\u202e", "\x1bP",
       "\x1b[2J", "\x1b[H"]


@pytest.mark.parametrize("text, shown", [
    ("\x1b]52;c;aGk=\x07", "\\x1b]52;c;aGk=\\x07"),
    ("\x1b]0;title\x1b\\", "\\x1b]0;title\\x1b\\"),
    ("3 failed\r\x1b[2Kall passed", "3 failed\\r\\x1b[2Kall passed"),
    ("\x9b2J", "\\u009b2J"),
    ("\x1bP1$r\x1b\\", "\\x1bP1$r\\x1b\\"),
    ("a\u202egnp.exe", "a\\u202egnp.exe"),
    ("\u2066x\u2069 \u200f", "\\u2066x\\u2069 \\u200f"),
    ("bell\x07 nul\x00 del\x7f", "bell\\x07 nul\\x00 del\\u007f"),
    ("lines\nand\ttabs stay", "lines\nand\ttabs stay"),
    ("ünïcödé, 漢字, emoji 🎉", "ünïcödé, 漢字, emoji 🎉"),
])
def test_control_sequences_are_shown_escaped(text, shown):
    assert inert(text) == shown


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_inert_text_holds_no_control_and_stays_as_it_is(text):
    out = inert(text)
    assert not _UNSAFE.search(out)
    assert inert(out) == out
    if not _UNSAFE.search(text):
        assert out == text


def test_a_json_string_keeps_the_character_as_its_escape():
    """``--json`` (ASCII) has no control character to escape; JSON written with
    ``ensure_ascii=False`` (``orch ledger export``) gets the same character's JSON escape."""
    answer = "a\u202eb\x9bc\x7f"
    assert json.loads(inert(json.dumps({"a": answer}, ensure_ascii=False)))["a"] == answer
    assert inert(json.dumps({"a": answer})) == json.dumps({"a": answer})


def test_a_log_line_is_made_inert(capsys):
    from orchestrator import runtime
    from orchestrator.security.scrubbed_io import scrubbed_output

    runtime.configure_logging.cache_clear()
    with scrubbed_output():
        runtime.log().warning("provider_said", body="\x1b]0;pwned\x07\x1b[2J")
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b]0;pwned\\x07\\x1b[2J" in err


def _fanout(orch, *args: str, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "ORCH_HOME": str(orch.home), "ORCH_DAEMON": "off"}
    return subprocess.run([sys.executable, "-m", "orchestrator", "fanout", *args],
                          env=env, capture_output=True, text=True, timeout=120, **kwargs)


@pytest.mark.timeout(300)  # a real orch process; minutes on a loaded machine
def test_piped_answers_and_reasons_are_inert_and_files_keep_the_bytes(orch, scripted_server,
                                                                       tmp_path):
    orch.provider()
    scripted_server.script("a", Reply(text=FORGED))
    scripted_server.script("b", Reply(status=400, error_message="bad \x1b[2J\x1b[H all fine"))
    done = _fanout(orch, "-m", "scripted/a,scripted/b", "-p", "x", cwd=tmp_path)
    out = done.stdout + done.stderr
    for raw in RAW:
        assert raw not in out, (raw, out)
    assert "tests: 3 failed\\r\\x1b[2Kall tests passed" in done.stdout
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in done.stdout
    assert "\\u202eevil" in done.stdout and "\\u009b2J" in done.stdout
    reason = next(line for line in done.stdout.splitlines() if line.startswith("Reason:"))
    assert "\\x1b[2J" in reason, reason
    kept = [json.loads(m.read_text()) for m in (orch.home / "runs").rglob("metadata.json")]
    assert [d["answer"] for d in kept if d["model"] == "scripted/a"] == [FORGED]  # the file


def test_json_keeps_the_bytes_as_json_escapes(orch, scripted_server):
    from click.testing import CliRunner

    from orchestrator.cli import cli

    orch.provider()
    scripted_server.script("a", Reply(text=FORGED))
    as_json = CliRunner().invoke(cli, ["fanout", "-m", "scripted/a", "-p", "x", "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert not _UNSAFE.search(as_json.stdout)
    assert json.loads(as_json.stdout)["legs"][0]["answer"] == FORGED


@pytest.mark.timeout(300)
@pytest.mark.parametrize("models", ["scripted/a,scripted/b", "scripted/a"],
                         ids=["two legs: the table", "one leg: its answer streams"])
def test_on_a_terminal_the_answer_is_inert_and_the_table_still_draws(orch, scripted_server,
                                                                     tmp_path, models):
    """stdout and stderr on a pseudo-terminal: rich's live table draws (its own escapes),
    the model's escapes print as text. One leg: its answer streams under the table as well
    (a word at a time), then stdout prints it."""
    import fcntl
    import pty
    import struct
    import termios

    orch.provider()
    scripted_server.script("a", Reply(text=FORGED))
    scripted_server.script("b", Reply(text="ok"))
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, "ORCH_HOME": str(orch.home), "ORCH_DAEMON": "off", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "fanout", "-m", models,
                             "-p", "x"], stdin=slave, stdout=slave, stderr=slave, env=env,
                            cwd=tmp_path)
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal closed: the process ended
            break
        if not chunk:
            break
        seen += chunk
    proc.wait(timeout=60)
    os.close(master)
    text = seen.decode("utf-8", "replace")
    assert proc.returncode == 0, text
    assert "orch wave" in text  # the live table was drawn
    for raw in RAW:
        assert raw not in text, (raw, text)
    assert "tests: 3 failed\\r\\x1b[2Kall tests passed" in text


# -- every way to the terminal goes through the outlet ---------------------------------------

OUTLET = "orchestrator/security/outlet.py"
# (file, what): the few places allowed around the outlet, each for a reason
ALLOWED = {
    ("orchestrator/cli/__init__.py", "sys.__stdout__"),  # a closed pipe pointed at /dev/null
    ("orchestrator/mcp_server/server.py", "sys.__stdout__"),  # flushed before fd 1 moves
    ("orchestrator/daemon/server.py", "sys.__stderr__"),  # the daemon's log: inert() in it
    ("orchestrator/cli/bench_run.py", "write_raw"),  # orch's own -q line, rewritten in place
    ("orchestrator/cli/ledger_cmds.py", "write_data"),  # an export: exact only when redirected
}


def _bypasses(source: str, path: str) -> list[tuple[str, str]]:
    """Every way in ``source`` to reach the terminal other than sys.stdout / sys.stderr:
    the interpreter's original streams, a rich Console or Live of its own, a raw write to fd
    1 or 2, a stream's binary buffer, the terminal device, the outlet's raw channel."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "sys" and node.attr in ("__stdout__", "__stderr__"):
            found.append((path, f"sys.{node.attr}"))
        elif isinstance(node, ast.Attribute) and node.attr == "buffer" and isinstance(
                node.value, ast.Attribute) and node.value.attr in ("stdout", "stderr"):
            found.append((path, f"{node.value.attr}.buffer"))
        elif isinstance(node, ast.ImportFrom) and node.module in ("rich.console", "rich.live") \
                and any(a.name in ("Console", "Live") for a in node.names):
            found.append((path, f"{node.module}.{node.names[0].name}"))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "write" and isinstance(func, ast.Attribute) and getattr(
                    func.value, "id", "") == "os" and node.args and isinstance(
                    node.args[0], ast.Constant) and node.args[0].value in (1, 2):
                found.append((path, "os.write(1|2)"))
            elif name == "open" and node.args and isinstance(node.args[0], ast.Constant) \
                    and node.args[0].value == "/dev/tty":
                found.append((path, "/dev/tty"))
            elif name in ("write_raw", "write_data"):
                found.append((path, name))
            elif name in ("StreamHandler", "FileHandler"):
                found.append((path, name))
    return found


def test_the_walk_finds_each_way_around_the_outlet():
    """The walk below can fail: each bypass, written into a module, is found."""
    for snippet, what in [
        ("import sys\nsys.__stderr__.write(answer)\n", "sys.__stderr__"),
        ("from rich.console import Console\nConsole().print(answer)\n", "rich.console.Console"),
        ("import os\nos.write(2, answer.encode())\n", "os.write(1|2)"),
        ("import sys\nsys.stdout.buffer.write(data)\n", "stdout.buffer"),
        ("tty = open('/dev/tty', 'w')\n", "/dev/tty"),
        ("import logging\nlogging.StreamHandler(sys.stderr)\n", "StreamHandler"),
    ]:
        assert _bypasses(snippet, "x.py") == [("x.py", what)], snippet


def test_nothing_reaches_the_terminal_but_through_the_outlet():
    """Every module of ``orchestrator/`` and ``plugins/``: a new print site that writes
    around sys.stdout/sys.stderr (whose every write the outlet makes inert) fails here."""
    found = set()
    for folder in ("orchestrator", "plugins"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == OUTLET or rel.startswith("orchestrator/testing/"):
                continue
            found.update(_bypasses(path.read_text(encoding="utf-8"), rel))
    assert found - ALLOWED == set(), sorted(found - ALLOWED)
    assert ALLOWED - found == set(), sorted(ALLOWED - found)  # the list stays exact


def test_status_and_runs_show_print_a_stored_answer_inert(orch, scripted_server):
    """What was stored with the model's exact bytes is printed inert when read back."""
    from click.testing import CliRunner

    from orchestrator.cli import cli

    orch.provider()
    scripted_server.script("a", Reply(text=FORGED))
    scripted_server.script("b", Reply(status=400, error_message="bad \x1b[2J\x1b]0;pwned\x07"))
    wave = orch.run_wave(["scripted/a", "scripted/b"], "x")
    for args in (["status", wave.doc["wave_id"]], ["runs", "show", wave.doc["wave_id"]]):
        shown = CliRunner().invoke(cli, args)
        printed = shown.stdout + shown.stderr
        assert "\x1b" not in printed and "\x9b" not in printed and "\u202e" not in printed, args
        assert "\\x1b" in printed, (args, printed)
