"""``orchestrator.workspace``, the public confinement API third-party tools (and ``orch mcp``)
call: the built-in tools' rules, one named error, credential content withheld on read."""

from __future__ import annotations

import os
import re

import pytest

from orchestrator import workspace
from orchestrator.workspace import PathRefused


@pytest.fixture
def root(tmp_path):
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("print('hi')\n")
    (ws / ".env").write_text("TOKEN=env-value-Vx7q2Lm9Rt4k\n")
    (ws / "key.txt").write_text("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\n"
                                "-----END PRIVATE KEY-----\nafter\n")
    (ws / "blob.bin").write_bytes(b"\x00\x01\x02")
    (tmp_path / "outside.txt").write_text("outside\n")
    (ws / "out-link").symlink_to(tmp_path / "outside.txt")
    os.mkfifo(ws / "pipe")
    return ws


@pytest.mark.parametrize("path, why", [
    ("/etc/passwd", "outside the workspace root"),
    ("../../../../etc/passwd", "climbs out of the workspace root"),
    ("out-link", "symlink that leads outside"),
    (".env", "rule '.env*'"),
    (".ENV", "rule '.env*'"),
    ("pipe", "named pipe, not a regular file"),
    ("src", "is a directory"),
    ("/proc/self/environ", "outside the workspace root"),
    ("missing.txt", "no such file"),
])
def test_resolve_refuses_with_one_line(root, path, why):
    with pytest.raises(PathRefused, match=re.escape(why)) as refused:
        workspace.resolve(path, root)
    assert "\n" not in str(refused.value)


def test_resolve_and_read_inside_the_rules(root):
    assert workspace.resolve("src/app.py", root) == (root / "src" / "app.py").resolve()
    assert workspace.resolve(str(root / "src"), root, want="dir") == (root / "src").resolve()
    assert workspace.read_text("src/app.py", root) == "print('hi')\n"
    assert workspace.read_text("key.txt", root) == "[withheld: private-key]\nafter\n"
    with pytest.raises(PathRefused, match="binary"):
        workspace.read_text("blob.bin", root)
    with pytest.raises(PathRefused, match="more than the 5"):
        workspace.read_text("src/app.py", root, max_bytes=5)
    with pytest.raises(PathRefused, match=re.escape("rule 'src/'")):
        workspace.read_text("src/app.py", root, deny=["src/"])
    assert workspace.read_text(".env", root, allow=[".env"]).startswith("TOKEN=[withheld")
    with pytest.raises(PathRefused, match="no workspace"):
        workspace.read_text("src/app.py", None)
