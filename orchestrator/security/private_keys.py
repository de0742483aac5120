"""Private key blocks, BEGIN to END, whatever code wraps their lines.

A key is pasted into code as often as into a file of its own: as a Python string
concatenation (``"MIIE...\\n" "abcd...\\n"``), a Java or Go ``+`` chain, a JS array, a YAML
block, a markdown ``> `` quote, behind comment markers, as one JSON string with escaped
``\\n``. The block is found by its structure: a BEGIN marker, then the lines that hold
nothing but the key's base64 (or an armour header) inside that wrapping, up to the END
marker. With no END (a read cut short), it ends at the last such line.

A BEGIN followed by no base64 run of 16 characters before its END (or before the block's
lines end) is a placeholder or a parser's constants (``"-----BEGIN RSA PRIVATE
KEY-----\\n...\\n-----END..."``, ``_SK_START = b"-----BEGIN OPENSSH..."``), not a key.

Runs on RE2: a key-line pattern on ``re`` takes quadratic time on a long line of blanks.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

BEGIN = (r"-----BEGIN (?P<kind>(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----"
         r"|PuTTY-User-Key-File-\d+:")
_END = re.compile(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_PUTTY_END = re.compile(r"Private-MAC:[^\n]*")
MARKERS = ("PRIVATE KEY", "PuTTY-User-Key")  # a text without these holds no block

_B64 = r"[A-Za-z0-9+/=]"
_ESCAPE = r"\\[nr]"  # a backslash-n written in a string literal
_ARMOUR = (r"(?:Proc-Type|DEK-Info|Comment|Version|Hash|Charset|MessageID|Encryption"
           r"|Public-Lines|Private-Lines|Key-Derivation|Argon2-[A-Za-z]+|Private-Hash): ?")
_STRING = (rf"[bBrRuUfFL@]{{0,2}}(?:\"(?:{_B64}|{_ESCAPE})*\"|'(?:{_B64}|{_ESCAPE})*'"
           rf"|`(?:{_B64}|{_ESCAPE})*`|[\"'`]{_ARMOUR}[^\"'`]*[\"'`])")
# What may wrap a key's line: indentation, a quote marker, a comment marker, a list or
# concatenation operator; after it, closing brackets, separators, a line continuation.
_BEFORE = r"(?:[ \t>#;%*+,.(\[{|&=-]|//|/\*|<<|\\)*"
_BETWEEN = r"[ \t+,.\\]*"
_AFTER = r"[ \t)\];,+.\\]*"
KEY_LINE = (rf"(?:[ \t]*\d+\t)?{_BEFORE}"  # a numbered line of ``read``
            rf"(?:{_STRING}(?:{_BETWEEN}{_STRING})*|{_B64}+(?:{_ESCAPE})*\\?|{_ARMOUR}.*|)"
            rf"{_AFTER}\r?")
# What may follow a BEGIN marker on its line: the rest of the string it sits in (base64,
# escaped line breaks), the string's close, more strings, closing wrappers.
BEGIN_REST = (rf"(?:{_B64}|{_ESCAPE})*[\"'`]?(?:{_BETWEEN}{_STRING})*{_AFTER}"
              rf"(?:{_B64}+(?:{_ESCAPE})*\\?)?{_AFTER}\r?")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{16,}")
_LONG_RUN = re.compile(r"[A-Za-z0-9+/]{40,}")


@functools.lru_cache(maxsize=1)
def _patterns() -> tuple[Any, Any, Any]:
    """(a BEGIN marker, a line of a key's body, the rest of a BEGIN line), on RE2."""
    import re2

    options = re2.Options()
    options.log_errors = False
    return (re2.compile(BEGIN, options), re2.compile(KEY_LINE, options),
            re2.compile(BEGIN_REST, options))


def _key_material(line: str, *, rest: bool = False) -> bool:
    """A line of a key's body (``rest``: what follows its BEGIN marker): base64 inside its
    wrapping, an armour header, or a line that carries a long random base64 run whatever
    surrounds it (``echo "MIIE..." >> key``)."""
    if _patterns()[2 if rest else 1].fullmatch(line):
        return True
    return any(any(c.isdigit() for c in run) and (not run.isalnum() or (
        any(c.isupper() for c in run) and any(c.islower() for c in run)))
        for run in _LONG_RUN.findall(line))


def _end_marker(begin) -> re.Pattern:
    return _END if begin.group("kind") else _PUTTY_END


def _end_of_block(text: str, begin) -> tuple[int, bool]:
    """Where the block starting at ``begin`` ends, and whether its END marker was found:
    on the BEGIN line or on the key lines after it; without one, at the last key line."""
    end_marker = _end_marker(begin)
    line_end = text.find("\n", begin.end())
    line_end = len(text) if line_end == -1 else line_end
    found = end_marker.search(text, begin.end(), line_end)
    if found:
        return found.end(), True
    if begin.group("kind") and not _key_material(text[begin.end():line_end], rest=True):
        return begin.end(), False  # "-----BEGIN ... KEY-----",rs=({...: a constant in code
    at = line_end
    while at < len(text):
        nxt = text.find("\n", at + 1)
        nxt = len(text) if nxt == -1 else nxt
        found = end_marker.search(text, at + 1, nxt)
        if found:
            return found.end(), True
        if not _key_material(text[at + 1:nxt]):
            return at, False
        at = nxt
    return len(text), False


def blocks(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of every private key block in ``text``."""
    if not any(marker in text for marker in MARKERS):
        return
    at = 0
    begin_re = _patterns()[0]
    while True:
        begin = begin_re.search(text, at)
        if begin is None:
            return
        end, ended = _end_of_block(text, begin)
        if not _BASE64_RUN.search(text, begin.end(), end):
            at = begin.end()  # a placeholder or a parser's markers: no key after them
            continue
        yield begin.start(), end
        at = max(end, begin.end())


def block_lines(lines: list[str]) -> set[int]:
    """The indexes of ``lines`` (a file split as its reader split it, line ends kept) that
    a private key block touches: what ``grep`` and a ``read`` from an offset withhold,
    found over the whole file so a line is known to be key material without its BEGIN."""
    text = "".join(lines)
    spans = list(blocks(text))
    if not spans:
        return set()
    touched: set[int] = set()
    start = 0
    span = 0
    for index, line in enumerate(lines):
        end = start + len(line)
        while span < len(spans) and spans[span][1] <= start:
            span += 1
        for s, e in spans[span:]:
            if s >= end:
                break
            if e > start:
                touched.add(index)
                break
        start = end
    return touched
