"""``orch doctor`` re-checks the keys of litellm's own vendors where it can: one cheap
authenticated call (``GET /models``, free) per vendor whose key variable is set. A 401 or 403
is a ``fail`` (the key is wrong, revoked or lacks access); no answer is a ``warn`` (offline is
not a broken key). The vendor's base-URL variable - the one litellm reads - is honoured, so a
gateway standing in for the vendor is what gets asked. Only names are ever shown."""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass

from orchestrator import keys

TIMEOUT_S = 3.0


@dataclass(frozen=True)
class Vendor:
    keys: tuple[str, ...]  # key variables, first set wins
    bases: tuple[str, ...]  # base-URL variables litellm reads
    default: str  # the vendor's API root (the path /models is appended to)
    header: str = "Authorization"  # how the key is sent
    scheme: str = "Bearer "
    extra: tuple[tuple[str, str], ...] = ()


VENDORS: dict[str, Vendor] = {
    "openai": Vendor(("OPENAI_API_KEY",), ("OPENAI_BASE_URL", "OPENAI_API_BASE"),
                     "https://api.openai.com/v1"),
    "anthropic": Vendor(("ANTHROPIC_API_KEY",), ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_BASE"),
                        "https://api.anthropic.com/v1", "x-api-key", "",
                        (("anthropic-version", "2023-06-01"),)),
    "gemini": Vendor(("GEMINI_API_KEY", "GOOGLE_API_KEY"), ("GEMINI_API_BASE",),
                     "https://generativelanguage.googleapis.com/v1beta", "x-goog-api-key", ""),
    "mistral": Vendor(("MISTRAL_API_KEY",), ("MISTRAL_API_BASE",), "https://api.mistral.ai/v1"),
    "groq": Vendor(("GROQ_API_KEY",), ("GROQ_API_BASE",), "https://api.groq.com/openai/v1"),
    "deepseek": Vendor(("DEEPSEEK_API_KEY",), ("DEEPSEEK_API_BASE",),
                       "https://api.deepseek.com"),
    "xai": Vendor(("XAI_API_KEY",), ("XAI_API_BASE",), "https://api.x.ai/v1"),
    "together_ai": Vendor(("TOGETHERAI_API_KEY", "TOGETHER_API_KEY"), ("TOGETHERAI_API_BASE",),
                          "https://api.together.xyz/v1"),
    "cerebras": Vendor(("CEREBRAS_API_KEY",), ("CEREBRAS_API_BASE",),
                       "https://api.cerebras.ai/v1"),
    "fireworks_ai": Vendor(("FIREWORKS_AI_API_KEY",), ("FIREWORKS_AI_API_BASE",),
                           "https://api.fireworks.ai/inference/v1"),
}


def probe(vendor: Vendor, key: str) -> tuple[str, str]:
    """("ok" | "refused" | "unreachable", what happened) for one ``GET {base}/models``."""
    base = next((b for v in vendor.bases if (b := keys.setting(v))), vendor.default)
    url = base.rstrip("/") + "/models"
    request = urllib.request.Request(url)
    request.add_header(vendor.header, vendor.scheme + key)
    for name, value in vendor.extra:
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S):
            return "ok", f"GET {url}: the key was accepted"
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return "refused", f"GET {url}: HTTP {exc.code}, the key was refused"
        return "unreachable", f"GET {url}: HTTP {exc.code}; the key could not be checked"
    except (TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return "unreachable", (f"GET {url}: no answer ({type(reason).__name__}); the key "
                               "could not be checked (offline is not a broken key)")


def key_rows() -> list:
    """One row per litellm vendor whose key variable is set."""
    from orchestrator.operations.doctor import FAIL, OK, WARN, Check
    from orchestrator.security.secrets import register

    rows = []
    for name, vendor in VENDORS.items():
        var = next((v for v in vendor.keys if keys.is_set(v)), None)
        if var is None:
            continue
        key = keys.read(var) or ""
        register(key, f"${var}")  # masked in anything printed from here on
        outcome, detail = probe(vendor, key)
        status = {"ok": OK, "refused": FAIL, "unreachable": WARN}[outcome]
        fix = (f"export a valid {var} (the one set was refused), or unset it"
               if outcome == "refused" else "check the network, or retry later")
        rows.append(Check(f"vendor {name}", f"${var}", status, detail, fix))
    return rows
