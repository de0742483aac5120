"""Keep API keys out of everything orch writes or prints: one secret registry per process.

Every value orch reads in order to send it as a credential is *registered* the moment it is
read (:func:`register`), whatever its variable is called. The scrubbers then replace:

- :func:`scrub_values` — registered values, exactly, and their obvious encodings (JSON and
  repr escapes, URL-encoded, base64 at any alignment, so ``Basic base64(user:v)`` too).
  Safe on anything, identifiers included: it never touches a string that holds no key.
- :func:`scrub` — the same, plus the high-confidence key *shapes* (``sk-…`` and friends) in
  free text only (answers, reasons, notes). Known identifiers of this process — model names,
  provider ids, base URLs, paths (:func:`register_identifier`) — are never cut by a shape.
- :func:`scrub_doc` — a JSON-able document: identifier fields by value only, text fully.

Environment variables whose names say they hold a secret are registered too (a safety net:
orch may never read them, but a provider or a model may echo them).
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

MASK = "***"
MIN_SECRET_CHARS = 8  # shorter values are placeholders, not keys; masking them mangles text

# Variables named like API_KEY, OPENAI_API_KEY_2, TOGETHER_APIKEY, OPENROUTER_AUTH, HF_TOKEN.
_SECRET_NAME = re.compile(
    r"(^|_)(API_?KEYS?|KEYS?|TOKENS?|SECRETS?|PASSWORDS?|PASSWD|PASS|AUTH|CREDENTIALS?)(_|\d|$)"
    r"|APIKEY|ACCESS_?KEY|SECRET", re.I)
# Variables that match the words above but never hold a credential.
_NOT_SECRET_NAME = re.compile(r"KEYBOARD|SOCK|_(FILE|PATH|DIR|ENV|NAME|ID|URL|HOST)$|^(XDG|LC)_",
                              re.I)

# High-confidence key shapes, for free text only: a known prefix then a long random run with
# at least one digit. Hostnames like ``ak-gateway-01`` and model names like
# ``sk-mixtral-8x7b-instruct`` are too short or too wordy to match.
_KEY_SHAPE = re.compile(
    r"(?<![A-Za-z0-9_\-./])(?:(?:sk|pk|rk|ak)-(?:[A-Za-z0-9]+-)?[A-Za-z0-9_\-]{20,}"
    r"|sk_(?:live|test)_[A-Za-z0-9]{16,}|AIza[0-9A-Za-z_\-]{35}|gh[pousr]_[A-Za-z0-9]{36,}"
    r"|github_pat_[A-Za-z0-9_]{40,}|xai-[A-Za-z0-9]{40,}|gsk_[A-Za-z0-9]{40,}"
    r"|nvapi-[A-Za-z0-9_\-]{40,}|pplx-[A-Za-z0-9]{40,})")
_HAS_DIGIT = re.compile(r"\d")
# Every shape starts with one of these: one search for them is half the cost of the scan.
_SHAPE_PREFIX = re.compile(r"[spra]k-|sk_|AIza|gh[pousr]_|github_pat_|xai-|gsk_|nvapi-|pplx-")


class _Registry:
    """Registered values (with their encodings) and known identifiers; thread-safe adds,
    lock-free reads of immutable tuples."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sources: dict[str, str] = {}  # value -> where it came from ($VAR, header, URL)
        self.needles: tuple[str, ...] = ()  # every form to mask, longest first
        self.identifiers: tuple[str, ...] = ()
        self._env: dict | None = None  # the environment snapshot last scanned
        self.version = 0  # bumped at every change: cached scrubs of older versions miss

    def add(self, value: str, source: str) -> None:
        with self._lock:
            known = value in self.sources
            self.sources[value] = source  # the latest reading names it in refusals
            if known:
                return
            forms = set(self.needles) | set(_encodings(value))
            self.needles = tuple(sorted(forms, key=len, reverse=True))
            self.version += 1

    def add_identifier(self, text: str) -> None:
        with self._lock:
            if text not in self.identifiers:
                self.identifiers = (*self.identifiers, text)
                self.version += 1

    def snapshot(self) -> tuple:
        with self._lock:
            return dict(self.sources), self.needles, self.identifiers

    def restore(self, saved: tuple) -> None:
        """Back to a :meth:`snapshot`; the environment is rescanned at the next scrub."""
        with self._lock:
            sources, self.needles, self.identifiers = saved
            self.sources = dict(sources)
            self._env = None
            self.version += 1

    def scan_env(self) -> None:
        """Register secret-named environment values; rescanned only when the environment
        changed (a C-level dict compare of os.environ's raw data)."""
        raw = getattr(os.environ, "_data", None)
        if raw is not None and self._env is not None and self._env == raw:
            return
        for name, value in list(os.environ.items()):
            if _SECRET_NAME.search(name) and not _NOT_SECRET_NAME.search(name):
                register(value, f"${name}")
        self._env = dict(raw) if raw is not None else None


_registry = _Registry()


def registry() -> _Registry:
    """This process's registry (tests snapshot and restore it around each test)."""
    return _registry


def _encodings(value: str) -> Iterable[str]:
    """The forms a value takes on its way into text orch writes."""
    yield value
    yield json.dumps(value)[1:-1]  # inside JSON text (ASCII-escaped)
    yield json.dumps(value, ensure_ascii=False)[1:-1]
    yield repr(value)[1:-1]  # inside a dict's repr in an exception message
    yield quote(value, safe="")
    yield quote_plus(value, safe="")
    raw = value.encode("utf-8")
    # base64 of anything containing the value (``user:value`` in Basic auth): the characters
    # that depend only on the value's bytes, at each of the three alignments.
    for k in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\0" * k + raw).decode("ascii")
            start, end = -(-8 * k // 6), 8 * (k + len(raw)) // 6
            middle = encoded[start:end]
            if len(middle) >= MIN_SECRET_CHARS:
                yield middle


def register(value: str | None, source: str = "a credential") -> None:
    """Remember ``value`` as a secret for this process: from now on it never leaves."""
    if value and isinstance(value, str) and len(value.strip()) >= MIN_SECRET_CHARS:
        _registry.add(value, source)
        if value != value.strip():
            _registry.add(value.strip(), source)


def _url_credentials(url: str) -> tuple[list[str], list[str]]:
    """(userinfo parts, names of query parameters that carry a credential) of ``url``."""
    from urllib.parse import parse_qsl, urlsplit

    try:
        parts = urlsplit(url)
        userinfo = [p for p in (parts.username, parts.password) if p]
    except ValueError:
        return [], []
    keys = [k for k, _ in parse_qsl(parts.query, keep_blank_values=True) if _credential_param(k)]
    return userinfo, keys


def _credential_param(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) or name.lower() in ("key", "sig", "signature", "code")


def has_url_credentials(url: str | None) -> bool:
    """``url`` carries ``user:pass@`` or a credential query parameter (``?key=``)."""
    if not url or not isinstance(url, str):
        return False
    userinfo, keys = _url_credentials(url)
    return bool(userinfo or keys)


def mask_url(url: str | None) -> str | None:
    """``url`` as it may be shown: ``http://***@host/v1``, ``?key=***``; its credentials are
    registered as well, so no other output shows them either."""
    if not url or not isinstance(url, str) or not has_url_credentials(url):
        return url
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    register_url(url)
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    if parts.username or parts.password:
        netloc = f"{MASK}@{netloc}"
    query = urlencode([(k, MASK if _credential_param(k) else v)
                       for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def register_url(url: str | None) -> None:
    """Credentials a URL carries (``user:pass@``, ``?key=``) are secrets; the URL without them
    is an identifier."""
    if not url or not isinstance(url, str):
        return
    from urllib.parse import parse_qsl, urlsplit

    try:
        parts = urlsplit(url)
        userinfo = (parts.username, parts.password)
    except ValueError:
        return
    for part in userinfo:
        register(part, "a URL credential")
    for key, value in parse_qsl(parts.query):
        if _credential_param(key):
            register(value, "a URL credential")
    register_identifier(url)
    if parts.hostname:
        register_identifier(parts.hostname)


# Headers every client sends with public values: never registered (their values are words
# such as ``application/json`` that masking would cut out of ordinary text).
_PUBLIC_HEADERS = frozenset({
    "content-type", "accept", "accept-encoding", "accept-language", "user-agent",
    "http-referer", "referer", "x-title", "anthropic-version", "anthropic-beta",
    "openai-beta", "cache-control", "connection", "content-length",
})
_HEADER_PARAMS = ("extra_headers", "headers")
_QUERY_PARAMS = ("extra_query", "query_params")
_URL_PARAMS = ("api_base", "base_url")


def register_headers(headers: dict[str, Any] | None) -> None:
    """Every header sent with a request, whatever its name (``X-Plugin-Data`` may carry a
    key as well as ``X-Api-Key``), but the few whose values are public words."""
    if not isinstance(headers, dict):
        return
    for name, value in headers.items():
        if not isinstance(value, str) or str(name).lower() in _PUBLIC_HEADERS:
            continue
        register(value, f"header {name}")
        for scheme in ("Bearer ", "Basic ", "Token "):
            if value.startswith(scheme):
                register(value[len(scheme):], f"header {name}")


def register_params(params: dict[str, Any] | None) -> None:
    """Everything credential-like in a request's parameters, registered before the request
    is written anywhere: headers (a plugin's ``before_request``, a variant, a provider),
    URL credentials, query keys, and any secret-named parameter (``api_key``,
    ``azure_ad_token``, ...), at any depth (``extra_body``)."""
    if not isinstance(params, dict):
        return
    for name, value in params.items():
        key = str(name)
        if key in _HEADER_PARAMS:
            register_headers(value)
        elif key in _QUERY_PARAMS and isinstance(value, dict):
            for qname, qvalue in value.items():
                if isinstance(qvalue, str):
                    register(qvalue, f"query parameter {qname}")
        elif key in _URL_PARAMS and isinstance(value, str):
            register_url(value)
        elif isinstance(value, dict):
            register_params(value)
        elif isinstance(value, str) and _SECRET_NAME.search(key) \
                and not _NOT_SECRET_NAME.search(key):
            register(value, f"parameter {key}")


def register_identifier(text: str | None) -> None:
    """A name orch itself uses (model, provider id, base URL, path): key shapes never cut it."""
    if text and isinstance(text, str) and len(text) >= 3:
        _registry.add_identifier(text)


def secret_values() -> list[str]:
    """Every registered value (longest first), the environment's secret-named ones included."""
    _registry.scan_env()
    return sorted(_registry.sources, key=len, reverse=True)


def source_of(value: str) -> str:
    return _registry.sources.get(value, "a credential")


def find_position(text: str) -> tuple[int, str] | None:
    """(offset, where the value came from) of the first registered value in ``text``."""
    hits = [(at, source_of(value)) for value in secret_values()
            if (at := text.find(value)) >= 0]
    return min(hits) if hits else None


def scrub_values(text: str) -> str:
    """Mask every registered value and its encodings; nothing else is touched."""
    return _through(text, _values, _values_cached)


def _through(text: str, plain, cached) -> str:
    if not text or len(text) < MIN_SECRET_CHARS:
        return text  # shorter than any registered value or key shape
    _registry.scan_env()
    if len(text) < 256:
        return plain(text, _registry.version)
    return cached(text, _registry.version)  # a briefing is logged at every request


def _values(text: str, version: int) -> str:
    for needle in _registry.needles:
        if needle in text:
            text = text.replace(needle, MASK)
    return text


def scrub(text: str) -> str:
    """Free text: registered values, then key shapes outside known identifiers."""
    return _through(text, _scrub, _scrub_cached)


def _scrub(text: str, version: int) -> str:
    text = scrub_values(text)
    if not _SHAPE_PREFIX.search(text):
        return text
    return _KEY_SHAPE.sub(_shape_replacer(text), text)


# Long texts recur (a briefing in every request a leg logs, in every leg): the same string
# object hashes once, so a repeat costs a lookup. The registry's version is in the key.
_values_cached = functools.lru_cache(maxsize=512)(_values)
_scrub_cached = functools.lru_cache(maxsize=512)(_scrub)


def _shape_replacer(text: str):
    spans = [(m.start(), m.end()) for ident in _registry.identifiers if ident in text
             for m in re.finditer(re.escape(ident), text)]

    def replace(match: re.Match) -> str:
        found = match.group(0)
        if not _HAS_DIGIT.search(found):
            return found
        if any(a <= match.start() and match.end() <= b for a, b in spans):
            return found  # part of a model name, provider id, URL or path orch uses
        return MASK

    return replace


def key_shape_pattern() -> str:
    """The key shapes' regular expression, for the credential-content scan
    (:mod:`orchestrator.security.credential_content`), which runs it over every tool result."""
    return _KEY_SHAPE.pattern


# Fields that hold identifiers, never free text: masked by value, never by shape.
IDENTIFIER_FIELDS = frozenset({
    "model", "models", "provider", "chair_model", "leg_id", "wave_id", "run_id", "retry_of",
    "base_url", "api_base", "runs_dir", "project_dir", "workspace", "path", "dir", "kind",
    "status", "variant", "id", "name", "tool", "cost_source", "finish_reason", "seat",
    "judge", "chair", "started_at", "ended_at", "created_at", "at", "type", "role",
    "tool_call_id",
})


def scrub_doc(value: Any, field: str | None = None) -> Any:
    """A JSON-able document with every string scrubbed: identifier fields by value only."""
    if isinstance(value, str):
        return scrub_values(value) if field in IDENTIFIER_FIELDS else scrub(value)
    if isinstance(value, dict):
        return {scrub_values(k) if isinstance(k, str) else k: scrub_doc(v, k)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_doc(v, field) for v in value]
    return value
