"""Keeping what a model reads inside the workspace root: the confinement rules.

Every path a model sends is resolved the way the operating system would (symlinks followed,
``..`` applied after them) and the *resolved* path is what gets opened, so nothing outside
the root can be read whatever the spelling. Each refusal is a :class:`PathRefused` whose message
tells the model what to send instead.

The rules are the core's (the built-in workspace tools and :mod:`orchestrator.workspace`'s
public API both apply them); a plugin imports them, never the other way round.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from orchestrator.workspace.policy import Policy, under_system_dir

# Directories the recursive tools (grep, glob) do not descend into: version control and caches
# are noise for a reviewer and can be huge. ``list`` still shows them.
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv",
                       ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox"})
BINARY_SNIFF_BYTES = 8192
# Credential files outside any workspace that a hard link inside one could point at.
HOME_CREDENTIALS = (".ssh", ".aws/credentials", ".netrc", ".pgpass", ".vault-token",
                    ".config/gh/hosts.yml", ".git-credentials", ".docker/config.json",
                    ".kube/config", ".npmrc", ".pypirc", ".gnupg")
# The one walk that finds the workspace's deny-listed files' inodes (for hard links) stops
# here; past it, a hard-linked file is refused rather than guessed about.
INODE_WALK_ENTRIES = 50_000
INODE_WALK_SECONDS = 2.0
UNVERIFIED_LINK = "hard link (its other names could not all be checked)"
# The walk's answer is shared by the legs of a wave (each has its own Workspace) for this
# long: a pnpm-style tree of hard links must not cost a walk per leg.
INODE_CACHE_SECONDS = 10.0
_inode_cache: dict[tuple, tuple[float, dict[tuple[int, int], str], bool]] = {}


class PathRefused(Exception):  # noqa: N818 - a refusal the model reads, not a crash
    """A path or file the workspace rules will not open; ``str()`` is one line for the
    model, saying what to send instead."""


Refused = PathRefused  # the workspace tools' own name for it


def kind(mode: int) -> str:
    for test, name in ((stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISFIFO, "named pipe"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


class Workspace:
    """The root the tools may read, and the checks every path passes before it is opened."""

    def __init__(self, root: Path | str, deny: object = (), allow: object = ()) -> None:
        self.root = os.path.realpath(root)
        self.policy = Policy(self.root, deny, allow)  # deny-list, allow-list, .gitignore
        self.withheld: dict[str, int] = {}  # what the last walk left out, by rule
        self._denied_inodes: dict[tuple[int, int], str] | None = None
        self._inodes_complete = True

    def inside(self, real: str) -> bool:
        return os.path.commonpath([self.root, real]) == self.root

    def rel(self, real: str) -> str:
        """How a resolved path is shown to the model: relative to the root, '/'-separated."""
        rel = os.path.relpath(real, self.root)
        return "." if rel == "." else rel.replace(os.sep, "/")

    def resolve(self, raw: object, *, want: str | None = None) -> str:
        """The real path ``raw`` names inside the root, or :class:`Refused`.

        ``want`` is ``"file"`` (a regular file), ``"dir"`` or None (either)."""
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            raw = "."
        if not isinstance(raw, str):
            raise Refused(f"path must be a string, got {type(raw).__name__}; "
                          "send e.g. \"src/app.py\"")
        if "\x00" in raw:
            raise Refused("path contains a NUL byte; send a plain relative path like "
                          "\"src/app.py\"")
        if raw.startswith("~"):
            raise Refused(f"{raw!r}: '~' is not expanded here; paths are relative to the "
                          "workspace root, e.g. \"src/app.py\"")
        joined = os.path.join(self.root, raw)  # an absolute raw replaces the root
        if not self.inside(os.path.normpath(joined)):
            if os.path.isabs(raw):
                raise Refused(f"{raw!r} is outside the workspace root; send a path relative "
                              "to the root instead (list(path=\".\") shows what is there)")
            raise Refused(f"{raw!r} climbs out of the workspace root with '..'; only files "
                          "under the root can be read (list(path=\".\") shows what is there)")
        real = os.path.realpath(joined)
        if not self.inside(real):
            raise Refused(f"{raw!r} goes through a symlink that leads outside the workspace "
                          "root; it cannot be read. Pick another path under the root.")
        if under_system_dir(real):
            raise Refused(f"{raw!r} is under /proc, /sys or /dev; those are never read")
        for name in (self.rel(os.path.normpath(joined)), self.rel(real)):  # asked, and real
            rule = self.policy.denied(name, os.path.isdir(real))
            if rule:
                raise Refused(self.policy.refusal(name, rule))
        try:
            st = os.stat(real)
        except FileNotFoundError:
            raise Refused(f"no such file or directory: {self.rel(real)!r}; "
                          f"list(path={self._existing_parent(real)!r}) shows what is "
                          "there") from None
        except OSError as exc:
            raise Refused(f"{self.rel(real)!r} cannot be opened ({exc.strerror})") from None
        if want == "dir" and not stat.S_ISDIR(st.st_mode):
            raise Refused(f"{self.rel(real)!r} is not a directory; use read(path=...) for "
                          "a file")
        if want == "file":
            if stat.S_ISDIR(st.st_mode):
                raise Refused(f"{self.rel(real)!r} is a directory; use list(path="
                              f"{self.rel(real)!r}) to see its files, then read one of them")
            if not stat.S_ISREG(st.st_mode):
                raise Refused(f"{self.rel(real)!r} is a {kind(st.st_mode)}, not a regular "
                              "file; only text files can be read")
        elif not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            raise Refused(f"{self.rel(real)!r} is a {kind(st.st_mode)}; only files and "
                          "directories can be used")
        rule = self.hard_link_rule(st)
        if rule:
            raise Refused(self.policy.refusal(self.rel(real), rule))
        return real

    def hard_link_rule(self, st: os.stat_result) -> str | None:
        """The deny rule of another name of this file (a hard link to ``.env`` under a
        harmless name is still ``.env``), or None. Only files with more than one link pay."""
        if not stat.S_ISREG(st.st_mode) or st.st_nlink < 2:
            return None
        rule = self._inodes().get((st.st_dev, st.st_ino))
        if rule:
            return f"hard link to a file denied by {rule!r}"
        return None if self._inodes_complete else UNVERIFIED_LINK

    def _inodes(self) -> dict[tuple[int, int], str]:
        """(device, inode) -> rule of every multiply-linked deny-listed file in the
        workspace and of the usual credential files of the home directory; found once."""
        if self._denied_inodes is not None:
            return self._denied_inodes
        key = (self.root, tuple(self.policy.rules), os.path.expanduser("~"))
        cached = _inode_cache.get(key)
        if cached and time.monotonic() - cached[0] < INODE_CACHE_SECONDS:
            self._denied_inodes, self._inodes_complete = cached[1], cached[2]
            return cached[1]
        found: dict[tuple[int, int], str] = {}
        deadline, seen = time.monotonic() + INODE_WALK_SECONDS, 0

        def note(path: str, rule: str) -> None:
            try:
                st = os.stat(path)
            except OSError:
                return
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                found.setdefault((st.st_dev, st.st_ino), rule)

        home = os.path.expanduser("~")
        for rel in HOME_CREDENTIALS:
            path = os.path.join(home, rel)
            files = ([os.path.join(path, f) for f in _listdir(path)] if os.path.isdir(path)
                     else [path])
            for f in files:
                note(f, f"~/{rel}")
        note(os.path.join(self.root, ".git", "config"), "**/.git/config")
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            seen += len(dirnames) + len(filenames)
            if seen > INODE_WALK_ENTRIES or time.monotonic() > deadline:
                self._inodes_complete = False
                break
            rel_dir = self.rel(dirpath)
            dir_rule = self.policy.denied(rel_dir, True)
            dirnames[:] = [d for d in dirnames
                           if d not in SKIP_DIRS and not under_system_dir(
                               os.path.join(dirpath, d))]
            for f in filenames:
                rule = dir_rule or self.policy.denied(
                    f if rel_dir == "." else f"{rel_dir}/{f}")
                if rule:
                    note(os.path.join(dirpath, f), rule)
        self._denied_inodes = found
        _inode_cache[key] = (time.monotonic(), found, self._inodes_complete)
        return found

    def _existing_parent(self, real: str) -> str:
        parent = os.path.dirname(real)
        while parent != self.root and not os.path.isdir(parent) and self.inside(parent):
            parent = os.path.dirname(parent)
        return self.rel(parent) if self.inside(parent) else "."

    def check_text(self, real: str) -> None:
        """Refuse a binary file (NUL bytes near its start): its bytes mean nothing as text."""
        with open(real, "rb") as fh:
            head = fh.read(BINARY_SNIFF_BYTES)
        if b"\x00" in head:
            raise Refused(f"{self.rel(real)!r} is a binary file; only text files can be read. "
                          "Look for its source or a text file that describes it.")

    def walk(self, start: str) -> Iterator[tuple[str, bool]]:
        """(real path, is_dir) under ``start`` in sorted order, never leaving the root:
        symlinks are not followed into directories, SKIP_DIRS are not entered, deny-listed
        and .gitignored paths are left out (counted in ``withheld``), /proc and friends
        never entered."""
        self.withheld = {}
        if os.path.isfile(start):
            yield start, False
            return
        for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
            kept = []
            for d in sorted(dirnames):
                full = os.path.join(dirpath, d)
                if d in SKIP_DIRS or under_system_dir(full):
                    continue
                if self.hidden(full, True):
                    continue
                kept.append(d)
                yield full, True
            dirnames[:] = kept
            for f in sorted(filenames):
                full = os.path.join(dirpath, f)
                if not self.hidden(full, False):
                    yield full, False

    def hidden(self, path: str, is_dir: bool) -> str | None:
        """Why a walked or listed path is left out (a deny rule, or ".gitignore"), counted
        in ``withheld``; None when it is shown."""
        why = self.policy.denied(self.rel(path), is_dir) or (
            ".gitignore" if self.policy.ignored(path, is_dir) else None)
        if why:
            self.withheld[why] = self.withheld.get(why, 0) + 1
        return why

    def readable(self, path: str) -> tuple[str | None, str | None]:
        """(real path, None) for a walked file the tools may open — a regular file whose real
        location is inside the root — else (None, why not)."""
        real = os.path.realpath(path)
        if not self.inside(real):
            return None, "links leading outside the root"
        if under_system_dir(real):
            return None, "under /proc, /sys or /dev"
        if self.policy.denied(self.rel(real)):
            return None, "links to deny-listed files"
        try:
            st = os.stat(real)
        except OSError:
            return None, "unreadable"
        if not stat.S_ISREG(st.st_mode):
            return None, "devices, pipes or sockets"
        if self.hard_link_rule(st):
            return None, "hard links to deny-listed files"
        return real, None


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def glob_regex(pattern: str) -> str:
    """A shell glob as a regular expression over '/'-separated relative paths.

    ``**`` spans directories, ``*`` and ``?`` stay within one, ``[...]`` is a character class.
    (Python 3.11 has no ``glob.translate``; ``fnmatch`` lets ``*`` cross ``/``.)"""
    import re

    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = pattern.find("]", i + 2 if pattern[i + 1:i + 2] in ("!", "]") else i + 1)
            if j == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1:j].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out) + r"\Z"
