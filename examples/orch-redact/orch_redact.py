"""orch-redact: secrets and e-mail addresses never leave in a model request.

Every outgoing request is rewritten just before it is sent: API-key-shaped strings, the values
of environment variables whose names end in ``_KEY``/``_TOKEN``/``_SECRET``/``_PASSWORD``, and
e-mail addresses become ``[redacted ...]`` markers. The leg's ``metadata.json`` records how
many of each were removed under ``redactions`` (counts only, never the values).

It is a ``wrapper=True`` implementation, so it sees the request *after* every other plugin's
``before_request`` change: nothing another plugin adds can slip past it.

It is fail-closed: if it fails, the request is refused and nothing is sent.

Settings (``plugin_config.redact`` in orch's config.json), all optional::

    {"emails": true, "keys": true, "env": true, "min_env_length": 8,
     "patterns": {"ticket": "TCK-[0-9]{6}"}}
"""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import Any

from orchestrator.hookspecs import hookimpl

NAME = "redact"
# A redactor that breaks (a bad pattern in its settings, a bug) must not let the request go
# out unredacted: its failure refuses the request instead (docs/plugins.md, Failing closed).
FAIL_CLOSED = True

EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
# Well-known key shapes: OpenAI/Anthropic-style sk-..., GitHub, AWS access key ids, Slack,
# Google, Hugging Face.
API_KEY = re.compile(
    r"\b(?:sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"
    r"|AKIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}|hf_[A-Za-z0-9]{30,})"
)
SECRET_NAME = re.compile(r"(?:^|_)(?:KEY|TOKEN|SECRET|PASSWORD)$", re.IGNORECASE)
# Structural fields of a chat message: ids and names, never free text.
STRUCTURAL = frozenset({"role", "tool_call_id", "id", "type", "name"})


class Redactor:
    """The rules for one leg: built from the leg's plugin settings and the environment."""

    def __init__(self, settings: dict[str, Any], environ: dict[str, str]) -> None:
        self.rules: list[tuple[str, re.Pattern[str] | str, str]] = []
        if settings.get("env", True):
            shortest = int(settings.get("min_env_length", 8))
            values = {(v, k) for k, v in environ.items()
                      if SECRET_NAME.search(k) and len(v) >= shortest}
            for value, var in sorted(values, key=lambda vk: -len(vk[0])):  # longest first
                self.rules.append(("env", value, f"[redacted ${var}]"))
        if settings.get("keys", True):
            self.rules.append(("api_key", API_KEY, "[redacted key]"))
        for label, pattern in (settings.get("patterns") or {}).items():
            self.rules.append((label, re.compile(pattern), f"[redacted {label}]"))
        if settings.get("emails", True):
            self.rules.append(("email", EMAIL, "[redacted email]"))
        self.counts: Counter[str] = Counter()

    def text(self, text: str) -> str:
        for label, rule, marker in self.rules:
            if isinstance(rule, str):
                n = text.count(rule)
                text = text.replace(rule, marker) if n else text
            else:
                text, n = rule.subn(marker, text)
            self.counts[label] += n
        return text

    def value(self, value: Any, key: str | None = None) -> Any:
        """Every free-text string in a message, however deeply nested (content parts, tool
        call arguments); ids, roles and names are left alone."""
        if isinstance(value, str):
            return value if key in STRUCTURAL else self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v, k) for k, v in value.items()}
        return value


@hookimpl(wrapper=True)
def before_request(leg, request):
    request = yield  # every other plugin's before_request has run
    redactor = Redactor(leg.plugin_config(NAME), dict(os.environ))
    messages = redactor.value(request.messages)
    found = +redactor.counts  # drop zero counts
    if not found:
        return request
    total = leg.state.setdefault(NAME, Counter())
    total.update(found)
    leg.set("redactions", dict(sorted(total.items())))
    return request.evolve(messages=messages)
