"""Credential *content*: what is withheld from text before a model is sent it.

The deny-list stops credential files by name; this stops credentials by what they look like,
wherever they sit (a key pasted into ``notes.txt``, a token in ``.git/config``'s remote URL,
a tool result of a third-party plugin, a ``--context`` file). Each match is replaced by
``[withheld: RULE]`` so the model can read why, and say so, instead of guessing.

The detection is Yelp's ``detect-secrets`` where it fits, plus a few targeted rules where it
does not (each says why):

- ``detect-secrets``' provider detectors (AWS, GitHub, GitLab, Slack, Stripe, Twilio, JWT,
  npm, PyPI, ...), run as their own compiled regular expressions over the whole text at
  once: its per-line ``scan_line`` costs ~0.5 ms a line (measured in docs/performance.md),
  too much for every tool result of a 64-leg wave, and masking needs spans it does not give.
  Its entropy plugins are left out: they flag every commit id, hash and lock-file digest.
- ``private-key``: the whole block, BEGIN to END (or to the end of the text), of a PEM,
  OpenSSH, PGP or PuTTY private key. detect-secrets flags only the BEGIN line (and not
  ``ENCRYPTED PRIVATE KEY``); the body is the secret.
- ``url-credentials``: the userinfo of a URL (``https://user:pass@``, ``https://TOKEN@``), as
  in ``.git/config`` remotes; detect-secrets' basic-auth rule misses a token with no colon.
- ``auth-header``: ``Authorization: Basic|Bearer|token VALUE`` (git's ``extraheader``).
- ``secret-assignment``: ``password=``/``token=``/``api_key:``/``secret =`` ... followed by a
  value of high entropy (detect-secrets' keyword list, plus ``token``); placeholders,
  variables and code references (``os.environ[...]``, ``$X``, ``changeme``) are left alone.
- ``key-shape``: the provider key shapes orch already masks in its own output
  (:mod:`orchestrator.security.secrets`: ``sk-…``, ``AIza…``, ``xai-…``, ...).

A stream read line by line (``grep``, a ``read`` from an offset) can be inside a key block
whose BEGIN line it never shows: :class:`KeyBlocks` follows the file from its first line.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from orchestrator.security.secrets import key_shape_pattern

MARK = "[withheld: {rule}]"

_PRIVATE_BEGIN = (r"-----BEGIN (?P<kind>(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----"
                  r"|PuTTY-User-Key-File-\d+:")
_PUTTY_END = re.compile(r"^Private-MAC:.*$", re.M)
# A line of a key's body as a file or a numbered ``read`` shows it: base64, an armour header
# ("Proc-Type: 4,ENCRYPTED", "Comment: ..."), or blank.
# (On RE2: on ``re`` a long line of blanks after a BEGIN would take quadratic time.)
_KEY_LINE = (r"(?:\s*\d+\t)?[ \t]*(?:[A-Za-z0-9+/=]{4,}|[A-Za-z][A-Za-z0-9-]*: ?.*|)"
             r"[ \t]*\r?")
_URL_USERINFO = (r"\b[A-Za-z][A-Za-z0-9+.\-]{1,15}://"
                 r"([^\s/@:?#'\"<>]+(?::[^\s/@?#'\"<>]*)?)@[A-Za-z0-9\[]")
_AUTH_HEADER = (r"(?i)\bauthorization\s*[:=]\s*(?:basic|bearer|token|digest)\s+"
                r"([^\s'\"]{6,})")
# detect-secrets' keyword list (KeywordDetector.DENYLIST), plus token and credential; the
# keyword first (a leading name run would make the search quadratic), then the value.
_ASSIGNMENT = (r"(?i)(?:{keywords})[A-Za-z0-9_\-]*[\]'\"]{{0,2}}\s*(?::=|=>|==|=|:)\s*"
               r"['\"`]?([^\s'\"`;,)(\]\[{{}}<>]{{8,}})")
# Every keyword above contains one of these (lower case); every key shape of
# orchestrator.security.secrets starts with one of these (test_credential_content checks both).
_ASSIGNMENT_STEMS = ("key", "pass", "pwd", "secret", "token", "credential", "contras")
_SHAPE_PREFIXES = ("sk-", "pk-", "rk-", "ak-", "sk_", "AIza", "ghp_", "gho_", "ghu_", "ghs_",
                   "ghr_", "github_pat_", "xai-", "gsk_", "nvapi-", "pplx-")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_.]*")  # os.environ, settings.DB_PASSWORD
_PLACEHOLDER = re.compile(r"(?i)changeme|placeholder|example|redacted|your[_\-]|xxxx|\*\*\*|\.\.\.")
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-+/=.]*")
MIN_ENTROPY = 3.0  # bits per character; "hunter2hunter2" 2.8, a random 12-char value ~3.5


@dataclass(frozen=True)
class Match:
    rule: str
    start: int
    end: int


@dataclass(frozen=True)
class Withheld:
    """A text with its credential content replaced, and the rules that fired (sorted)."""
    text: str
    rules: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.rules)


def _compiled(pattern: str):
    """RE2 where the pattern allows it (linear time, ~300x faster here than ``re`` on the
    case-insensitive keyword search), else ``re`` (detect-secrets' few lookaheads)."""
    import re2

    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error:
        return re.compile(pattern)


def _slug(secret_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")


# detect-secrets' "name = value" forms of IBM, Cloudant and SoftLayer keys start with this
# lookbehind; each costs 2-30 ms on a 12 kB text (backtracking), and secret-assignment
# covers their shape. Their URL forms are kept.
_KEYWORD_FORM = r"(?:(?<=\W)|(?<=^))"


@functools.lru_cache(maxsize=1)
def _detectors() -> tuple[Any, dict[str, str]]:
    """One RE2 alternation of every detect-secrets provider detector that is a plain regex
    list (one pass over the text instead of ~30, each re-encoding it), and group -> rule.
    Left out: the entropy ones (noise on hashes), IPs (not a credential), keywords and
    private keys (targeted rules do those with spans and entropy), and the backtracking
    keyword forms. RE2 has no lookahead: a trailing "not a word character" is dropped (a match
    is extended to the end of its token anyway) and repetitions past RE2's 1000 left open."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    left_out = {"Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector",
                "KeywordDetector", "PrivateKeyDetector", "BasicAuthDetector"}
    parts, rules = [], {}
    for secret_type, cls in sorted(get_mapping_from_secret_type_to_class().items()):
        if cls.__name__ in left_out or not issubclass(cls, RegexBasedDetector):
            continue
        for regex in cls().denylist:
            if regex.pattern.startswith(_KEYWORD_FORM):
                continue
            pattern = re.sub(r"\{(\d+),(\d{4,})\}", r"{\1,}",
                             regex.pattern.replace(r"(?!\w)", ""))
            name = f"d{len(parts)}"
            parts.append(f"(?P<{name}>{pattern})")
            rules[name] = _slug(secret_type)
    return _compiled("|".join(parts)), rules


@functools.lru_cache(maxsize=1)
def _shapes() -> tuple[Any, int]:
    """orch's key shapes on RE2 (the lookbehind becomes a consumed character), and the
    group that holds the key."""
    pattern = key_shape_pattern()
    guard = r"(?<![A-Za-z0-9_\-./])"
    if not pattern.startswith(guard):
        return re.compile(pattern), 0
    return _compiled(r"(?:^|[^A-Za-z0-9_\-./])(" + pattern[len(guard):] + ")"), 1


@functools.lru_cache(maxsize=1)
def _assignment() -> Any:
    from detect_secrets.plugins.keyword import DENYLIST

    keywords = "|".join([*DENYLIST, "token", "credential", "access_?key"])
    return _compiled(_ASSIGNMENT.format(keywords=keywords))


@functools.lru_cache(maxsize=1)
def _rules() -> tuple[Any, Any]:
    return _compiled(_URL_USERINFO), _compiled(_AUTH_HEADER)


@functools.lru_cache(maxsize=1)
def _keys() -> tuple[Any, Any]:
    """(a private key's BEGIN, a line of a key's body), on RE2."""
    return _compiled(_PRIVATE_BEGIN), _compiled(_KEY_LINE)


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    if not value:
        return 0.0
    counts: dict[str, int] = {}
    for c in value:
        counts[c] = counts.get(c, 0) + 1
    n = len(value)
    return -sum(k / n * math.log2(k / n) for k in counts.values())


def _secret_value(value: str) -> bool:
    """A value of high entropy with a digit, not a variable, a code reference, a URL or path
    (a URL's credentials are ``url-credentials``' to find) or a placeholder."""
    return (entropy(value) >= MIN_ENTROPY and any(c.isdigit() for c in value)
            and not _IDENTIFIER.fullmatch(value) and value[0] not in "$%@&*{</.~"
            and "://" not in value and not _PLACEHOLDER.search(value))


def _end_marker(begin: re.Match) -> re.Pattern:
    kind = begin.group("kind")
    return re.compile(rf"-----END {re.escape(kind)}-----") if kind else _PUTTY_END


def _end_of_block(text: str, begin: re.Match) -> int:
    """Where a key block that starts at ``begin`` ends: at its END marker, found on the BEGIN
    line or on the key-looking lines that follow it; without one (a read cut short, a key in
    a string), at the end of those lines."""
    end_marker = _end_marker(begin)
    line_end = text.find("\n", begin.end())
    line_end = len(text) if line_end == -1 else line_end
    found = end_marker.search(text, begin.end(), line_end)
    if found:
        return found.end()
    at = line_end
    while at < len(text):
        nxt = text.find("\n", at + 1)
        nxt = len(text) if nxt == -1 else nxt
        found = end_marker.search(text, at + 1, nxt)
        if found:
            return found.end()
        if not _keys()[1].fullmatch(text[at + 1:nxt]):
            return at
        at = nxt
    return len(text)


def _blocks(text: str) -> Iterable[Match]:
    for begin in _keys()[0].finditer(text):
        yield Match("private-key", begin.start(), _end_of_block(text, begin))


def find(text: str) -> list[Match]:
    """Every credential in ``text``: non-overlapping, in order (the earliest, then the
    longest, wins an overlap)."""
    if not text:
        return []
    found: list[Match] = []
    if "PRIVATE KEY" in text or "PuTTY-User-Key" in text:
        found += _blocks(text)
    # Each pass below costs ~0.2 ms on 12 kB (RE2 re-reads the text): a substring test
    # (microseconds) skips the ones that cannot match.
    lowered = text.lower()
    url, auth = _rules()
    if "@" in text and "://" in text:
        for m in url.finditer(text):
            info = m.group(1)
            user, _, password = info.partition(":")
            if password or (len(user) >= 12 and _secret_value(user)):
                found.append(Match("url-credentials", m.start(1), m.end(1)))
    if "authorization" in lowered:
        for m in auth.finditer(text):
            found.append(Match("auth-header", m.start(1), m.end(1)))
    if any(stem in lowered for stem in _ASSIGNMENT_STEMS):
        for m in _assignment().finditer(text):
            if _secret_value(m.group(1)):
                found.append(Match("secret-assignment", m.start(1), m.end(1)))
    detectors, rules = _detectors()
    for m in detectors.finditer(text):
        if m.end() > m.start():  # to the end of the token (a JWT's signature too)
            rule = next(rules[k] for k, v in m.groupdict().items() if v is not None)
            found.append(Match(rule, m.start(), _TOKEN_TAIL.match(text, m.end()).end()))
    shapes, key = _shapes()
    if any(prefix in text for prefix in _SHAPE_PREFIXES):
        for m in shapes.finditer(text):
            if any(c.isdigit() for c in m.group(key)):
                found.append(Match("key-shape", m.start(key), m.end(key)))
    found.sort(key=lambda m: (m.start, -m.end))
    kept: list[Match] = []
    for m in found:
        if kept and m.start < kept[-1].end:
            if m.end > kept[-1].end:  # overlapping: widen the earlier one
                kept[-1] = Match(kept[-1].rule, kept[-1].start, m.end)
            continue
        kept.append(m)
    return kept


def withhold(text: str) -> Withheld:
    """``text`` with every credential replaced by ``[withheld: RULE]``."""
    matches = find(text)
    if not matches:
        return Withheld(text, ())
    out, at = [], 0
    for m in matches:
        out += [text[at:m.start], MARK.format(rule=m.rule)]
        at = m.end
    out.append(text[at:])
    return Withheld("".join(out), tuple(sorted({m.rule for m in matches})))


def note(rules: Iterable[str]) -> str:
    """The line a tool result ends with when something was withheld."""
    named = ", ".join(sorted(set(rules)))
    return (f"[credential content withheld (rules: {named}): orch never sends credentials to "
            "a model; ask the user if you need what was there]")


class KeyBlocks:
    """Follows a file line by line: is this line inside a private key block?

    ``grep`` and ``read`` from an offset see lines of a key body without its BEGIN line; fed
    every line from the file's first, this says which lines to withhold (the same extent
    :func:`find` gives a block)."""

    def __init__(self) -> None:
        self._end: re.Pattern | None = None  # the END marker awaited, inside a block

    def inside(self, line: str) -> bool:
        if self._end is not None:
            if self._end.search(line):
                self._end = None
                return True
            if _keys()[1].fullmatch(line.rstrip("\n")):
                return True
            self._end = None  # the block ended without its END line
        begin = _keys()[0].search(line) if ("PRIVATE KEY" in line
                                             or "PuTTY-User-Key" in line) else None
        if begin is None:
            return False
        end = _end_marker(begin)
        if not end.search(line, begin.end()):
            self._end = end
        return True
