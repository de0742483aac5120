"""Credential *content*: what is withheld from text before a model is sent it.

The deny-list stops credential files by name; this stops credentials by what they are,
wherever they sit (a key pasted into ``notes.txt``, a token in ``.git/config``'s remote URL,
a tool result of a third-party plugin, a ``--context`` file). Each match is replaced by
``[withheld: RULE]`` so the model can read why, and say so, instead of guessing. One scanner
for every caller: ``withhold`` over a text, ``block_lines`` for the tools that show a file
line by line (``grep``, ``read`` from an offset).

The detection is Yelp's ``detect-secrets`` where it fits, plus targeted rules where it does
not (each says why):

- ``detect-secrets``' provider detectors (AWS, GitHub, GitLab, Slack, Stripe, Twilio, JWT,
  npm, PyPI, ...), run as their own compiled regular expressions over the whole text at
  once: its per-line ``scan_line`` costs ~0.5 ms a line (measured in docs/performance.md),
  too much for every tool result of a 64-leg wave, and masking needs spans it does not give.
  Its entropy plugins are left out: they flag every commit id, hash and lock-file digest.
  A match inside a longer run of letters, or an example (``AKIA...EXAMPLE``, ``xxxx``), is not.
- ``private-key``: the whole block, BEGIN to END, of a PEM, OpenSSH, PGP or PuTTY private
  key, whatever code wraps its lines (:mod:`orchestrator.security.private_keys`).
  detect-secrets flags only the BEGIN line (and not ``ENCRYPTED PRIVATE KEY``).
- ``url-credentials``: the userinfo of a URL (``https://user:pass@``, ``https://TOKEN@``), as
  in ``.git/config`` remotes; detect-secrets' basic-auth rule misses a token with no colon.
- ``auth-header``: ``Authorization: [Basic|Bearer|token] VALUE`` (git's ``extraheader``).
- ``curl-user``: ``curl -u user:password`` / ``--user``, across the command's continued lines.
- ``secret-assignment``: ``password=``, ``token:``, ``"X-Api-Key": ``, ``define('DB_PASSWORD',
  ...)``, ``<password>...</password>`` ... with a value of high entropy (detect-secrets'
  keyword list, plus ``token``); ``b"..."`` literals included.
- ``key-shape``: the provider key shapes orch already masks in its own output
  (:mod:`orchestrator.security.secrets`: ``sk-…``, ``AIza…``, ``xai-…``, ...), when what
  follows the prefix is random (``sk-mixtral-8x7b-instruct`` is a model).

Whether a value found at such a place is a secret, or code, a count, a variable or a
placeholder, is :mod:`orchestrator.security.secret_values`' to say.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from orchestrator.security import private_keys
from orchestrator.security.secret_values import (
    MIN_ENTROPY,
    entropy,
    header_secret,
    placeholder,
    secret_value,
    url_password,
    url_token,
)
from orchestrator.security.secrets import key_shape_pattern

MARK = "[withheld: {rule}]"

_URL_USERINFO = (r"\b[A-Za-z][A-Za-z0-9+.\-]{1,15}://"
                 r"([^\s/@:?#'\"<>]+(?::[^\s/@?#'\"<>]*)?)@[A-Za-z0-9\[]")
_AUTH_HEADER = (r"(?i)\bauthorization['\"]?\s*[:=]\s*['\"]?"
                r"(?:(?:basic|bearer|token|digest|api-token)\s+)?([^\s'\"]{6,})")
# detect-secrets' keyword list (KeywordDetector.DENYLIST), plus token and credential; the
# keyword first (a leading name run would make the search quadratic), then how the value is
# given: ``=``, ``:``, ``=>``, ``==``, or ``,`` after a quoted name (``define('X', 'v')``).
_ASSIGNMENT = (r"(?i)(?:{keywords})(?P<tail>[A-Za-z0-9_\-]*)(?P<close>[\]'\"]{{0,2}})"
               r"(?:[ \t]+(?:string|str|const|final|char ?\*?))?[ \t]*"
               r"(?P<op>:{{1,3}}=|[.+?]=|=>|===?|!==?|=|:|,)[ \t]*"
               r"(?:[bBrRuU]{{0,2}}['\"`])?(?P<value>[^\s'\"`;,)(\]\[{{}}<>]{{8,}})")
# A command-line flag: ``-ClientSecret 'v'``, ``--password v``, ``--api-key=v``.
_FLAG = (r"(?i)(?:^|\s)--?[A-Za-z0-9_\-]*(?:{keywords})[A-Za-z0-9_\-]*(?:=|[ \t]+)"
         r"['\"]?(?P<value>[^\s'\"`;,)(\]\[{{}}<>]{{8,}})")
# curl's ``-u user:password`` / ``--user``, its line continuations followed.
_CURL_USER = (r"\bcurl\b(?:[^\n]|\\\n)*?\s(?:-u|--user)(?:=|[ \t]{{0,5}})['\"]?"
              r"[^\s:'\"]*:(?P<value>[^\s'\"]{{3,}})")
_XML_ELEMENT = (r"(?i)<[\w:.\-]*(?:{keywords})[\w:.\-]*(?:\s[^>]*)?>\s*"
                r"(?P<value>[^<\s]{{8,}})\s*</")
# Names that say "token" but hold a count, a cursor or an idempotency id, or a pointer
# (matched on the name in snake_case: ``nextToken`` is ``next_token``).
_NOT_SECRET_NAME = re.compile(
    r"(?:^|[_\-.])(?:next|page|continuation|change|request|idempotency|lifecycle_action|"
    r"public_key|sync|cursor|c?sx?rf|max|input|output|total|prompt|completion|cached?|"
    r"reasoning|num|count)[_\-]?tokens?$|tokens$|"
    r"[_\-](?:file|path|dir|env|name|id|url|uri|host|type|length|size|count|limit|version|"
    r"usage|hint|endpoint|header|field|prefix|format|expires?(?:_in|_at)?)$")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# Every keyword above contains one of these (lower case); every key shape of
# orchestrator.security.secrets starts with one of these (test_credential_content checks both).
_ASSIGNMENT_STEMS = ("key", "pass", "pwd", "secret", "token", "credential", "contras")
_SHAPE_PREFIXES = ("sk-", "pk-", "rk-", "ak-", "sk_", "AIza", "ghp_", "gho_", "ghu_", "ghs_",
                   "ghr_", "github_pat_", "xai-", "gsk_", "nvapi-", "pplx-")
_NAME_CHAR = re.compile(r"[A-Za-z0-9_\-.]")
_QUERY_NEXT = re.compile(r"&[A-Za-z_][A-Za-z0-9_]*=|\\[nrt]")
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-+/=.]*")
_DIGEST_BEFORE = re.compile(r"sha\d+[=\-]$")
_KEY_BODY_RUN = re.compile(r"[A-Za-z0-9]{16,}")
_DATA_CHAR = re.compile(r"[A-Za-z0-9+/=]")
DATA_RUN = 256  # no credential is this long a run of base64; embedded data is


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
def _assignment() -> tuple[Any, Any]:
    """(``name = value``, ``<name>value</name>``, ``--name value``, ``curl -u user:pass``),
    keywords spelt with ``_`` or ``-``."""
    from detect_secrets.plugins.keyword import DENYLIST

    words = [w.replace("_?", r"[_\-]?") for w in DENYLIST]
    keywords = "|".join([*words, "token", "credential", r"access[_\-]?key"])
    return (_compiled(_ASSIGNMENT.format(keywords=keywords)),
            _compiled(_XML_ELEMENT.format(keywords=keywords)),
            _compiled(_FLAG.format(keywords=keywords)), _compiled(_CURL_USER.format()))


@functools.lru_cache(maxsize=1)
def _rules() -> tuple[Any, Any]:
    return _compiled(_URL_USERINFO), _compiled(_AUTH_HEADER)


def _name_start(text: str, at: int) -> int:
    """Where the name whose keyword starts at ``at`` begins (``DB_PASSWORD`` for ``PASSWORD``)."""
    while at > 0 and _NAME_CHAR.match(text, at - 1):
        at -= 1
    return at


def _assignments(text: str, lowered: str) -> Iterable[Match]:
    assign, element, flag, curl = _assignment()
    if "curl" in text:
        value_at = curl.groupindex["value"]  # google-re2 spans groups by number only
        for m in curl.finditer(text):
            if url_password(m.group("value")):
                yield Match("curl-user", m.start(value_at), m.end(value_at))
    if not any(stem in lowered for stem in _ASSIGNMENT_STEMS):
        return
    group = assign.groupindex
    tail, value_at = group["tail"], group["value"]
    for m in assign.finditer(text):
        start = _name_start(text, m.start())
        if start and text[start - 1] in ":/":  # arn:aws:secretsmanager:..., a/path/secret=
            continue
        if _NOT_SECRET_NAME.search(_CAMEL.sub("_", text[start:m.end(tail)]).lower()):
            continue
        if m.group("op") == "," and not m.group("close"):
            continue  # f(password, token): arguments, not a value given to a name
        value, begin = m.group("value"), m.start(value_at)
        # ?token=abc&next=1, "TOKEN=abc\\nNEXT=1": the value ends at the & or the \\n
        cut = _QUERY_NEXT.search(value)
        value = value[:cut.start()] if cut else value
        if text[m.end(value_at):m.end(value_at) + 1] == "(" and not cut:
            continue  # a call: token = make_token2(...)
        if secret_value(value):
            yield Match("secret-assignment", begin, begin + len(value.rstrip(".")))
    for pattern, needle in ((element, "</"), (flag, "-")):
        if needle not in text:
            continue
        value_at = pattern.groupindex["value"]
        for m in pattern.finditer(text):
            if secret_value(m.group("value")):
                yield Match("secret-assignment", m.start(value_at), m.end(value_at))


def _detected(text: str) -> Iterable[Match]:
    detectors, rules = _detectors()
    for m in detectors.finditer(text):
        if m.end() <= m.start():
            continue
        end = _TOKEN_TAIL.match(text, m.end()).end()  # to the end of the token
        if _inside_data(text, m.start(), end):
            continue  # AKIA... in the middle of a font's base64, not a key
        token = text[m.start():end]
        if placeholder(token) or entropy(token) < MIN_ENTROPY:
            continue  # AWS's AKIAIOSFODNN7EXAMPLE, SKxxxxxxxx, ACCA in a DNA sequence
        rule = next(rules[k] for k, v in m.groupdict().items() if v is not None)
        yield Match(rule, m.start(), end)


def _inside_data(text: str, start: int, end: int) -> bool:
    """The match sits inside a run of base64 longer than any token (embedded data)."""
    if not (start and text[start - 1].isalnum()):
        return False
    left = start
    while left > 0 and start - left <= DATA_RUN and _DATA_CHAR.match(text, left - 1):
        left -= 1
    return end - left > DATA_RUN


def _random_key(key: str) -> bool:
    """What follows a key prefix is random: mixed case and digits, or a long alphanumeric
    run with a digit. ``sk-mixtral-8x7b-instruct`` is a model id."""
    body = re.sub(r"^[A-Za-z]+[-_](?:[a-z]+[-_])?", "", key)
    if (any(c.isupper() for c in body) and any(c.islower() for c in body)
            and any(c.isdigit() for c in body)):
        return True
    return any(any(c.isdigit() for c in run) for run in _KEY_BODY_RUN.findall(body))


def find(text: str) -> list[Match]:
    """Every credential in ``text``: non-overlapping, in order (the earliest, then the
    longest, wins an overlap)."""
    if not text:
        return []
    found: list[Match] = [Match("private-key", s, e) for s, e in private_keys.blocks(text)]
    # Each pass below costs ~0.2 ms on 12 kB (RE2 re-reads the text): a substring test
    # (microseconds) skips the ones that cannot match.
    lowered = text.lower()
    url, auth = _rules()
    if "@" in text and "://" in text:
        for m in url.finditer(text):
            user, colon, password = m.group(1).partition(":")
            if url_password(password) if colon else (url_token(user) and not text.startswith(
                    ("ssh:", "git+ssh:", "sftp:"), m.start())):
                found.append(Match("url-credentials", m.start(1), m.end(1)))
    if "authorization" in lowered:
        for m in auth.finditer(text):
            if header_secret(m.group(1)):
                found.append(Match("auth-header", m.start(1), m.end(1)))
    found += _assignments(text, lowered)
    found += _detected(text)
    shapes, key = _shapes()
    if any(prefix in text for prefix in _SHAPE_PREFIXES):
        for m in shapes.finditer(text):
            shape = m.group(key)
            if (any(c.isdigit() for c in shape) and _random_key(shape)
                    and not _DIGEST_BEFORE.search(text[max(0, m.start(key) - 10):m.start(key)])):
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


def block_lines(lines: list[str]) -> set[int]:
    """The indexes of a file's ``lines`` that a private key block touches (found over the
    whole file, as :func:`find` finds it): ``grep`` and ``read`` show each as
    ``[withheld: private-key]``, even when its BEGIN line is not shown."""
    return private_keys.block_lines(lines)


def note(rules: Iterable[str]) -> str:
    """The line a tool result ends with when something was withheld."""
    named = ", ".join(sorted(set(rules)))
    return (f"[credential content withheld (rules: {named}): orch never sends credentials to "
            "a model; ask the user if you need what was there]")
