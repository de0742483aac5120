"""Labelled samples for measuring the credential-content scan, read from public test fixtures.

Measurement data only: nothing here is committed from those projects; the bench reads a
checkout you point it at (``bench_credential_scan.py --corpus DIR``), outside the repo::

    mkdir -p /tmp/orch-corpus
    git clone --depth 1 https://github.com/gitleaks/gitleaks /tmp/orch-corpus/gitleaks
    git clone --depth 1 https://github.com/Yelp/detect-secrets /tmp/orch-corpus/detect-secrets

(PyPI's detect-secrets sdist holds the package without its tests: the fixtures are in the
repository's ``tests/plugins/``.)

- **gitleaks**: each rule in ``cmd/generate/config/rules/*.go`` validates itself against
  ``tps`` (strings it must find) and ``fps`` (strings it must not); ``GenerateSampleSecrets
  (id, "SECRET")`` expands a literal secret into gitleaks' ~25 assignment forms
  (``utils/generate.go``), each of which must lose ``SECRET``. Samples whose secret is
  generated at random (``secrets.NewSecret(regex)``) are skipped and counted.
- **detect-secrets**: ``tests/plugins/*_test.py``'s ``(payload, should_flag)`` tables, and
  the keyword plugin's ``(line, expected_secret)`` tables (``None``: not a secret).
- **orch**: ``bench/credential_samples.json``, written by the project: the wrappings, misses
  and ordinary lines of issue 38.

A positive counts as found when the scan withholds something in it and, where the secret is
known, the secret is no longer in the text. Parsing is by hand (no Go toolchain, no code of
either project executed): a literal it cannot read is skipped and counted, never guessed.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Sample:
    text: str
    positive: bool
    source: str  # "gitleaks:aws", "detect-secrets:jwt", "orch:pem-js-array", ...
    secret: str | None = None  # when known: must not survive the scan


# -- gitleaks -------------------------------------------------------------------------------

_GO_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "a": "\a",
               "b": "\b", "f": "\f", "v": "\v"}


def _go_string(src: str, at: int) -> tuple[str, int] | None:
    """The Go string literal starting at ``src[at]`` (raw or interpreted) and where it ends."""
    quote = src[at]
    if quote == "`":
        end = src.find("`", at + 1)
        return (src[at + 1:end], end + 1) if end != -1 else None
    if quote != '"':
        return None
    out, i = [], at + 1
    while i < len(src):
        c = src[i]
        if c == '"':
            return "".join(out), i + 1
        if c == "\n":
            return None
        if c == "\\":
            nxt = src[i + 1]
            if nxt in _GO_ESCAPES:
                out.append(_GO_ESCAPES[nxt])
                i += 2
                continue
            if nxt == "x":
                out.append(chr(int(src[i + 2:i + 4], 16)))
                i += 4
                continue
            if nxt == "u":
                out.append(chr(int(src[i + 2:i + 6], 16)))
                i += 6
                continue
            return None
        out.append(c)
        i += 1
    return None


def _skip_space(src: str, i: int) -> int:
    while i < len(src):
        if src[i] in " \t\r\n,":
            i += 1
        elif src.startswith("//", i):
            i = src.find("\n", i)
            i = len(src) if i == -1 else i
        elif src.startswith("/*", i):
            i = src.index("*/", i) + 2
        else:
            return i
    return i


def _close_paren(src: str, i: int) -> int:
    """The index after the ``)`` closing the ``(`` at ``src[i]``, strings skipped."""
    depth = 0
    while i < len(src):
        c = src[i]
        if c in "`\"":
            lit = _go_string(src, i)
            i = lit[1] if lit else i + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def _string_list(src: str, i: int) -> tuple[list[str | None], int]:
    """The elements of a ``[]string{...}`` whose ``{`` is at ``src[i]``: each literal (``+``
    joins literals), or None for an element that is not one (a call)."""
    items: list[str | None] = []
    i += 1
    while True:
        i = _skip_space(src, i)
        if i >= len(src) or src[i] == "}":
            return items, i + 1
        parts: list[str] | None = []
        while True:
            lit = _go_string(src, i)
            if lit is None:  # a call or a name: skip the expression
                parts = None
                while i < len(src) and src[i] not in ",}\n":
                    i = _close_paren(src, i) if src[i] == "(" else i + 1
                break
            parts.append(lit[0])
            i = _skip_space(src, lit[1]) if src[lit[1]:lit[1] + 1] in " \t" else lit[1]
            j = i
            while j < len(src) and src[j] in " \t":
                j += 1
            if src[j:j + 1] == "+":
                i = _skip_space(src, j + 1)
                continue
            break
        items.append("".join(parts) if parts is not None else None)


def _templates(utils_src: str) -> list[str]:
    """GenerateSampleSecrets' forms (``{i}``, ``{I}``, ``{s}``), commented-out ones left out."""
    body = utils_src[utils_src.index("samples := map[string]string{"):]
    body = body[:body.index("\n\t}\n")]
    forms = []
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith("//") or ":" not in stripped:
            continue
        key = _go_string(stripped, 0)
        if key is None:
            continue
        rest = stripped[key[1]:].lstrip(" :\t")
        value = _go_string(rest, 0)
        if value is not None:
            forms.append(value[0])
    return forms


def gitleaks(root: Path) -> tuple[list[Sample], int]:
    """(samples, how many were skipped) from a gitleaks checkout."""
    rules_dir = root / "cmd" / "generate" / "config" / "rules"
    forms = _templates((root / "cmd" / "generate" / "config" / "utils" / "generate.go")
                       .read_text(encoding="utf-8"))
    samples: list[Sample] = []
    skipped = 0
    generate = re.compile(r'GenerateSampleSecrets?\(\s*"([^"]*)"\s*,\s*')
    block = re.compile(r"\b(tps|fps)\s*(?::=|=)\s*(?:append\(\s*\w+\s*,\s*)?\[\]string\{")
    for path in sorted(rules_dir.glob("*.go")):
        src = path.read_text(encoding="utf-8")
        rule = path.stem
        for m in block.finditer(src):
            items, _ = _string_list(src, m.end() - 1)
            for item in items:
                if item is None:
                    skipped += 1
                elif item.strip():
                    samples.append(Sample(item, m.group(1) == "tps", f"gitleaks:{rule}"))
        for m in generate.finditer(src):
            line_start = src.rfind("\n", 0, m.start()) + 1
            if not re.match(r"\s*tps\b", src[line_start:m.start()]):
                continue  # only the true positives are expanded this way
            lit = _go_string(src, m.end())
            if lit is None or src[lit[1]:lit[1] + 1] != ")":
                skipped += 1  # a secret made at random (secrets.NewSecret), or built
                continue
            ident, secret = m.group(1), lit[0]
            if "GenerateSampleSecrets" in m.group(0):
                texts = [f.replace("{i}", ident).replace("{I}", ident.upper())
                         .replace("{s}", secret) for f in forms]
            else:
                texts = [f'{ident}_api_token = "{secret}"']
            samples += [Sample(t, True, f"gitleaks:{rule}", secret) for t in texts]
    return samples, skipped


# -- detect-secrets -------------------------------------------------------------------------

class _Unknown(Exception):
    pass


def _eval(node: ast.AST, names: dict):
    """A literal, a name bound to one, ``'...'.format(...)``, ``+`` and ``*`` of those."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple | ast.List):
        return [_eval(e, names) for e in node.elts]
    if isinstance(node, ast.Name):
        if node.id in names:
            return names[node.id]
        raise _Unknown(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mult):
        left, right = _eval(node.left, names), _eval(node.right, names)
        return left + right if isinstance(node.op, ast.Add) else left * right
    if isinstance(node, ast.Subscript):
        value = _eval(node.value, names)
        if isinstance(node.slice, ast.Slice):
            lo = _eval(node.slice.lower, names) if node.slice.lower else None
            hi = _eval(node.slice.upper, names) if node.slice.upper else None
            return value[lo:hi]
        return value[_eval(node.slice, names)]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"):
        template = _eval(node.func.value, names)
        args = [_eval(a, names) for a in node.args]
        kwargs = {k.arg: _eval(k.value, names) for k in node.keywords}
        return template.format(*args, **kwargs)
    if isinstance(node, ast.JoinedStr):
        return "".join(str(_eval(v.value if isinstance(v, ast.FormattedValue) else v, names))
                       for v in node.values)
    raise _Unknown(type(node).__name__)


def _rows(value) -> list[tuple[str, bool, str | None]]:
    """(text, positive, secret) from a table's rows: ``(payload, should_flag)`` or
    ``(line, expected_secret)``."""
    rows = []
    for row in value if isinstance(value, list) else []:
        if not (isinstance(row, list) and len(row) == 2 and isinstance(row[0], str)):
            continue
        text, flag = row
        if isinstance(flag, bool):
            rows.append((text, flag, None))
        elif flag is None or isinstance(flag, str):
            rows.append((text, flag is not None, flag))
    return rows


def detect_secrets(root: Path) -> tuple[list[Sample], int]:
    samples: list[Sample] = []
    skipped = 0
    for path in sorted((root / "tests" / "plugins").glob("*_test.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        plugin = path.stem.removesuffix("_test")
        names: dict = {}
        tables: list = []
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                    node.targets[0], ast.Name):
                try:
                    names[node.targets[0].id] = value = _eval(node.value, names)
                except (_Unknown, Exception):  # noqa: BLE001 - not a literal: not data
                    continue
                if node.targets[0].id.endswith("_CASES"):
                    tables.append(value)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "parametrize" and len(node.args) == 2):
                continue
            try:
                argnames = _eval(node.args[0], names)
            except _Unknown:
                continue
            if not isinstance(argnames, str) or "should_flag" not in argnames:
                continue
            if [a.strip() for a in argnames.split(",")][-1] != "should_flag":
                continue
            elements = getattr(node.args[1], "elts", [])
            for element in elements:
                try:
                    row = _eval(element, names)
                except _Unknown:
                    skipped += 1
                    continue
                if isinstance(row, list) and len(row) > 2:
                    row = [row[-2], row[-1]]
                tables.append([row])
        for table in tables:
            for text, positive, secret in _rows(table):
                samples.append(Sample(text, positive, f"detect-secrets:{plugin}", secret))
    return samples, skipped


# -- orch's own -----------------------------------------------------------------------------

def orch_samples(path: Path = HERE / "credential_samples.json") -> list[Sample]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    return [Sample(s["text"], s["positive"], f"orch:{s['case']}", s.get("secret"))
            for s in doc["samples"]]


def load(corpus: Path | None) -> tuple[list[Sample], dict[str, int]]:
    """Every sample found under ``corpus`` (``gitleaks/``, ``detect-secrets/``; either may
    be missing) and orch's own; how many each source skipped."""
    samples = orch_samples()
    skipped: dict[str, int] = {}
    if corpus is not None:
        for name, reader in (("gitleaks", gitleaks), ("detect-secrets", detect_secrets)):
            if (corpus / name).is_dir():
                found, skipped[name] = reader(corpus / name)
                samples += found
    return samples, skipped
