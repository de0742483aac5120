"""The rules for names in model specs, checked where they are read: when ``config.json`` is
loaded (every face loads it), when a model name is parsed (``models/addressing.resolve``),
by ``orch provider add``/``orch alias set``, and reported by ``orch doctor``.

- A declared provider wins over litellm's own names in ``resolve``: a provider called
  ``openai`` in config.json (``orch provider add`` refuses the name, a hand edit does not)
  would silently send every ``openai/...`` model, and its key, to another endpoint. So the
  ids litellm (and the local model) answer to are reserved wherever a provider is read.
- A model name is printed on every output line that names a leg: a newline, an escape or a
  bidi override in it would forge a line (``--models $'a/b\\nall tests passed'``). Names are
  printable, without spaces or commas (the list separator).

Stdlib only: ``config.py`` reads it on every command.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

# Names that end up inside model specs (`ID/MODEL`, `--models a,b`, `MODEL@VARIANT`): keep them
# free of the separators those specs use.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

# `local` is the embedded local model's prefix. The rest are litellm provider prefixes: a declared
# provider wins over litellm in resolve(), so reusing one would silently reroute e.g. every
# `openai/...` model to another endpoint. Not litellm's full list (importing litellm takes
# seconds); these are the prefixes people actually type.
RESERVED_PROVIDERS = frozenset({
    "local",
    "openai", "text-completion-openai", "custom_openai", "openai_like", "azure", "azure_ai",
    "anthropic", "gemini", "vertex_ai", "bedrock", "sagemaker", "cohere", "cohere_chat",
    "mistral", "codestral", "groq", "together_ai", "openrouter", "deepseek", "xai",
    "fireworks_ai", "perplexity", "deepinfra", "cerebras", "sambanova", "databricks",
    "huggingface", "replicate", "ollama", "ollama_chat", "vllm", "hosted_vllm", "lm_studio",
    "llamafile", "litellm_proxy", "nvidia_nim", "watsonx", "ai21", "anyscale", "cloudflare",
    "github", "novita", "nebius", "moonshot", "dashscope", "zai", "meta_llama", "custom",
})
MAX_MODEL_NAME = 300
# Unicode categories a name must not hold: controls, format characters (zero-width, bidi
# overrides), separators (spaces, line and paragraph separators), unassigned and private use.
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"})


def shown(name: str) -> str:
    """A name as an error line may show it: every unprintable character escaped, so the
    line stays one line."""
    return "".join(c if unicodedata.category(c) not in _BAD_CATEGORIES or c == " "
                   else f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"
                   for c in name)


def model_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a model name (spec), or None."""
    if len(name) > MAX_MODEL_NAME:
        return f"is longer than {MAX_MODEL_NAME} characters"
    for c in name:
        if c == ",":
            return "holds a comma (the separator of --models lists)"
        if unicodedata.category(c) in _BAD_CATEGORIES:
            what = "a space" if c == " " else f"the unprintable character U+{ord(c):04X}"
            return f"holds {what}"
    return None


def check_model_name(name: str) -> str:
    """``name``, or a one-line usage error naming what is wrong."""
    from orchestrator.errors import UsageProblem

    problem = model_name_problem(name)
    if problem:
        raise UsageProblem(f"model name '{shown(name)}' {problem}; model names are printable, "
                        "without spaces or commas (PROVIDER/MODEL[@VARIANT])")
    return name


def reserved(provider_id: str) -> str | None:
    """What a reserved provider id already names, or None."""
    pid = provider_id.lower()
    if pid not in RESERVED_PROVIDERS:
        return None
    return "the embedded local model" if pid == "local" else f"litellm's own {pid}/... models"


def provider_problem(provider_id: str) -> str | None:
    """Why ``provider_id`` cannot be a declared provider's id, or None."""
    if not NAME_RE.match(provider_id):
        return (f"provider ID '{shown(provider_id)}' is not a simple name; use letters, "
                "digits, - _ .")
    what = reserved(provider_id)
    if what:
        return (f"provider ID {provider_id!r} is reserved ({what}): declared, it would send "
                f"every {provider_id.lower()}/... model to another endpoint")
    return None


def config_problems(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Every name in ``config.json`` these rules refuse: (key path, problem, fix)."""
    out: list[tuple[str, str, str]] = []
    providers = data.get("providers")
    for pid in sorted(providers) if isinstance(providers, dict) else ():
        problem = provider_problem(pid)
        if problem:
            fix = (f"remove it (orch provider remove {pid}) or rename it in config.json, "
                   f"e.g. my-{pid.lower()}" if NAME_RE.match(pid) else
                   "rename it in config.json")
            out.append((f"providers.{shown(pid)}", problem, fix))
    aliases = data.get("aliases")
    for name, target in sorted(aliases.items()) if isinstance(aliases, dict) else ():
        if isinstance(target, str) and model_name_problem(target):
            out.append((f"aliases.{shown(name)}", f"model name '{shown(target)}' "
                        f"{model_name_problem(target)}", f"orch alias set {shown(name)} MODEL"))
        elif not NAME_RE.match(name):
            out.append((f"aliases.{shown(name)}", f"alias name '{shown(name)}' is not a simple "
                        "name", "rename it in config.json (letters, digits, - _ .)"))
    councils = data.get("councils")
    for name, members in sorted(councils.items()) if isinstance(councils, dict) else ():
        if not NAME_RE.match(name):
            out.append((f"councils.{shown(name)}", f"council name '{shown(name)}' is not a "
                        "simple name", "rename it in config.json (letters, digits, - _ .)"))
        for n, member in enumerate(members if isinstance(members, list) else ()):
            if isinstance(member, str) and model_name_problem(member):
                out.append((f"councils.{shown(name)}[{n}]", f"model name '{shown(member)}' "
                            f"{model_name_problem(member)}",
                            f"orch council save {shown(name)} --models ..."))
    defaults = data.get("defaults")
    if isinstance(defaults, dict):
        models = defaults.get("models")
        for n, member in enumerate(models if isinstance(models, list) else ()):
            if isinstance(member, str) and model_name_problem(member):
                out.append((f"defaults.models[{n}]", f"model name '{shown(member)}' "
                            f"{model_name_problem(member)}", "fix it in config.json"))
        chair = defaults.get("chair")
        if isinstance(chair, str) and model_name_problem(chair):
            out.append(("defaults.chair", f"model name '{shown(chair)}' "
                        f"{model_name_problem(chair)}", "fix it in config.json"))
    return out
