"""Is this value a credential, or code, a count, a variable, a placeholder?

The credential-content rules find *where* a value is given to a name like ``password`` or
``token`` (an assignment, a header, a URL's userinfo); this module says whether the value
given there is a secret. Ordinary code is full of such places that hold no secret: a code
reference (``hashlib.sha256``, ``settings.OPENAI_API_KEY_V2``, ``e.metrics.prompt_tokens??0``),
a count (``"total_tokens": 1234567890``), a variable (``$OPENAI_API_KEY``, ``${{ secrets.X }}``,
``<your-token>``), a documentation placeholder (``user:pass@``, ``scott:tiger``, ``xxxx``) or
an AWS example key. Measured on the installed packages of a venv (docs/security.md §4), these
made most of what the scan withheld from ordinary code.
"""

from __future__ import annotations

import math
import re

MIN_ENTROPY = 3.0  # bits per character; "hunter2hunter2" 2.8, a random 12-char value ~3.5

# A reference to something defined elsewhere: a dotted path of names made of words
# (``hashlib.sha256``, ``e.metrics.prompt_tokens``, ``x25519.X25519PrivateKey``; not
# ``hvs.CAESIJ2wQ4...``, a token), litellm's ``os.environ/NAME``, snake_case,
# SCREAMING_CASE, PascalCase words. Each pattern reads a character one way only (no two
# alternatives match the same text, no nested repetition of one class): linear on hostile
# values, and a dotted path is split before its parts are matched.
_SEGMENT = re.compile(r"[a-z_$][a-z0-9_$]*|[A-Z_$][A-Z0-9_$]*"
                      r"|_*[A-Z0-9]*[a-z]+[0-9]*(?:[A-Z]+[a-z]+[0-9]*)*")
_NAME = re.compile(r"_*[a-z][a-z0-9]*(?:_+[a-z0-9]+)+_*|_*[A-Z][A-Z0-9]*(?:_+[A-Z0-9]+)+_*"
                   r"|(?:[A-Z][a-z]+[0-9]*){2,}|[A-Z0-9]*(?:[A-Z][a-z]{2,}[0-9]*){2,}"
                   r"|os\.environ/\w+")
MAX_NAME = 256  # no code reference is longer; a longer value is not read as one
# A value made of lower-case words that names what it is (``token-efficient-tools-2025-02-19``,
# an API's beta header; ``m2m-client-credentials``, an enum): a name, not the secret. (An
# age key, ``AGE-SECRET-KEY-1...``, and a Bedrock key, ``bedrock-api-key-YmVk...``, carry a
# random part: they are keys.)
_SLUG = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)+")
_NAMES_ITSELF = re.compile(r"(?:^|[-_])(?:tokens?|secrets?|passwords?|credentials?|api[-_]?keys?)"
                           r"(?:[-_]|$)")
# Operators no credential is written with, but code is: ``a??b``, ``x||0``, ``a===b``
# (base64's closing ``==`` is not), ``a?.b``, a value that is itself ``name=1``, a format
# string's ``%d`` or ``{}``.
_CODE_OPERATOR = re.compile(
    r"\?\?|\?\.|\|\||&&|!==?|===?(?=[^=])|=>|\*|\?[A-Za-z]|\bvoid\b|^[a-z_][a-z0-9_]*=[^=]"
    r"|%[sdrif]|\{\d*\}")
_VARIABLE = re.compile(r"[$%@&*{<\[(]|\{\{|.*\$\{|.*\{\{|.*<[A-Za-z_][\w\-]*>")
_PLACEHOLDER = re.compile(
    r"(?i)changeme|change_me|placeholder|example|redacted|dummy|sample|your[_\-.]|my[_\-]?"
    r"(?:api|secret|token|pass|key)|xxxx|\*\*\*|\.\.\.|abcdef|abc123|123456|qwerty|deadbeef|"
    r"password|passwd|(.)\1{7,}|"
    r"^(?:none|null|nil|true|false|undefined|test|secret|password|token|key|pass)\d*$")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}.*)?")
_SCHEME = re.compile(r"[a-z][a-z0-9+.\-]*:[^\s]")  # urn:..., arn:aws:..., https://...
# Words that make a URL password a placeholder when the password is nothing but letters.
_URL_PLACEHOLDER = re.compile(r"(?i)pass|pwd|secret|token|key|user|auth|changeme|tiger|foo|bar")


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    if not value:
        return 0.0
    counts: dict[str, int] = {}
    for c in value:
        counts[c] = counts.get(c, 0) + 1
    n = len(value)
    return -sum(k / n * math.log2(k / n) for k in counts.values())


def _code_name(value: str) -> bool:
    if len(value) > MAX_NAME:
        return False
    if _NAME.fullmatch(value):
        return True
    parts = value.split(".")
    return len(parts) > 1 and all(_SEGMENT.fullmatch(part) for part in parts)


def code_like(value: str) -> bool:
    """A code reference, a call, an expression or a variable, not a literal."""
    return bool(_code_name(value) or _CODE_OPERATOR.search(value)
                or _VARIABLE.match(value)
                or (_SLUG.fullmatch(value) and _NAMES_ITSELF.search(value)))


def _number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER.search(value))


def secret_value(value: str) -> bool:
    """A literal of high entropy with a digit; not code, a number, a date, a URL or path (a
    URL's credentials are ``url-credentials``' to find) or a placeholder."""
    if placeholder(value):
        return False
    value = value.rstrip(".:,")
    return (len(value) >= 8 and entropy(value) >= MIN_ENTROPY
            and any(c.isdigit() for c in value) and not _number(value)
            and not code_like(value) and not value.startswith(("/", "./", "../", "~/"))
            and not _TIMESTAMP.fullmatch(value) and not _SCHEME.match(value))


def header_secret(value: str) -> bool:
    """An ``Authorization:`` value: a literal token, not a variable (``$OPENAI_API_KEY``,
    ``<your-token>``, ``LITELLM_MASTER_KEY``, ``v4auth_header}``) or a short example
    (``sk-1234``)."""
    return secret_value(value.rstrip(")}];,"))


def url_password(password: str) -> bool:
    """A URL's password that is one, not documentation's ``user:pass@``, ``scott:tiger``,
    ``***:***``, ``${REDIS_PASSWORD}`` or ``a%20secret``."""
    from urllib.parse import unquote

    plain = unquote(password)
    if not plain or _VARIABLE.match(plain) or placeholder(plain) or code_like(plain):
        return False
    if set(plain) <= set("*x.-_X "):
        return False
    letters = plain.replace(" ", "")
    if letters.isalpha() and (len(letters) <= 10 or _URL_PLACEHOLDER.search(letters)):
        return False
    return True


def url_token(user: str) -> bool:
    """A URL's userinfo with no password that is a token (``https://TOKEN@host``)."""
    return len(user) >= 12 and secret_value(user)
