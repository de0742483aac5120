"""What names a seat: identifiers, not words.

Judges must not learn whose review they read, but a review about "the local cache" or "the
work queue" must reach them intact. So the terms redacted are identifiers: each seat's full
model name, base name, litellm name and model id (also written with spaces, dots or no
separator, the way display names are: "GPT 4o", "Claude 3.5 Sonnet" for ``claude-3-5-sonnet``),
its provider id, and the distinctive tokens of those names — at least 4 characters, with a
letter, not a parameter count, and not an ordinary English word (``qwen``, ``claude``,
``openai``; not ``local``, ``work``, ``mini``). A provider id that is an ordinary word is
redacted only where it is part of a full name, unless it is a catalogue provider
(``anthropic``): then the word names a vendor.

The word list is English-words' web2 (pinned in pyproject.toml): words it lists in lower case
are ordinary; proper nouns (``Claude``, ``Gemini``) are not.

Identifiers are not enough: "As Llama 3.1 (Meta Llama)", "Opus 4.1", "ChatGPT", "Moonshot AI"
name a seat without its id, and ``llama``, ``opus``, ``sonnet`` are English words. So each
seat's *family* is redacted too, ordinary words or not: every name of its model line, vendor
and products in :data:`FAMILIES` (the maintained table). A seat's families come from its
names' tokens (``kimi-k2`` → kimi) and from litellm's model list: the vendor of every entry
for the same model id (its provider ``moonshot``, ``vertex_ai-anthropic_models``, or a
Bedrock id's ``anthropic.`` prefix). A seat whose family cannot be told (``gw/reviewer``)
could be any: then every family in the table is redacted.
"""

from __future__ import annotations

import functools
import re

from orchestrator.models.addressing import ResolvedModel

MIN_TOKEN = 4
_CHUNK = re.compile(r"[A-Za-z0-9]+")
_SIZE = re.compile(r"\d+(?:\.\d+)?[bmk]|\d+x\d+[bm]|[a-z]\d+[bm]", re.I)  # 8b, 270m, 8x7b, a3b
_INFLECTIONS = ("ing", "ed", "es", "s", "er", "ers")
# Everyday words of model names that web2 (an older dictionary) lacks.
EVERYDAY = frozenset({"mini", "max", "nano", "online", "lite", "pro", "plus", "ultra"})


# family -> (tokens of model ids that belong to it, names that identify it in prose)
FAMILIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "llama": (("llama", "codellama"), ("Llama", "Meta", "Meta AI", "Code Llama")),
    "claude": (("claude",), ("Claude", "Opus", "Sonnet", "Haiku", "Anthropic")),
    "gpt": (("gpt", "chatgpt", "o1", "o3", "o4", "davinci", "codex"),
            ("GPT", "ChatGPT", "OpenAI", "Codex")),
    "gemini": (("gemini", "gemma", "palm", "bard"),
               ("Gemini", "Gemma", "Google", "DeepMind", "Bard", "PaLM")),
    "kimi": (("kimi", "moonshot"), ("Kimi", "Moonshot")),
    "qwen": (("qwen", "qwq"), ("Qwen", "QwQ", "Alibaba", "Tongyi", "Qianwen", "千问")),
    "mistral": (("mistral", "mixtral", "codestral", "ministral", "magistral", "pixtral",
                 "devstral"),
                ("Mistral", "Mixtral", "Codestral", "Ministral", "Magistral", "Pixtral",
                 "Devstral")),
    "deepseek": (("deepseek",), ("DeepSeek",)),
    "grok": (("grok",), ("Grok", "xAI")),
    "cohere": (("command", "cohere", "aya"), ("Cohere", "Command R", "Command A")),
    "phi": (("phi",), ("Phi", "Microsoft")),
    "glm": (("glm", "chatglm"), ("GLM", "ChatGLM", "Zhipu")),
    "nova": (("nova",), ("Amazon Nova", "Amazon")),
    "granite": (("granite",), ("Granite", "IBM")),
    "nemotron": (("nemotron",), ("Nemotron", "NVIDIA")),
    "minimax": (("minimax",), ("MiniMax",)),
    "jamba": (("jamba",), ("Jamba", "AI21")),
}
# litellm provider (or vendor prefix) -> family: the vendors among litellm's providers.
VENDORS: dict[str, str] = {
    "openai": "gpt", "chatgpt": "gpt", "text-completion-openai": "gpt", "anthropic": "claude",
    "gemini": "gemini", "google": "gemini", "meta": "llama", "meta_llama": "llama",
    "moonshot": "kimi", "moonshotai": "kimi", "dashscope": "qwen", "qwen": "qwen",
    "qwen_ai_platform": "qwen", "qwencloud": "qwen", "mistral": "mistral",
    "codestral": "mistral", "deepseek": "deepseek", "xai": "grok", "cohere": "cohere",
    "cohere_chat": "cohere", "zai": "glm", "bigmodel": "glm", "minimax": "minimax",
    "amazon": "nova", "amazon_nova": "nova", "ai21": "jamba",
}


@functools.lru_cache(maxsize=1)
def _litellm_vendors() -> dict[str, frozenset[str]]:
    """model id (lower case) -> the families litellm's model list files it under."""
    try:
        from orchestrator.runtime import litellm

        cost = litellm().model_cost
    except Exception:  # no litellm, or its map unreadable: the table still works
        return {}
    index: dict[str, set[str]] = {}
    for key, entry in cost.items():
        provider = str(entry.get("litellm_provider") or "") if isinstance(entry, dict) else ""
        vendor = re.sub(r"^vertex_ai-(\w+?)_models$", r"\1", provider)
        last = key.split("/")[-1].lower()
        prefix, dot, rest = last.partition(".")
        ids = {last}
        if dot and prefix in VENDORS:  # Bedrock: anthropic.claude-..., moonshotai.kimi-...
            ids.add(rest)
            vendor = prefix if vendor not in VENDORS else vendor
        family = VENDORS.get(vendor)
        if family:
            for i in ids:
                index.setdefault(i, set()).add(family)
    return {k: frozenset(v) for k, v in index.items()}


def families(model: ResolvedModel) -> set[str]:
    """The families a seat belongs to (empty when its names say nothing)."""
    model_id = model.base_name.split("/", 1)[-1]
    lite_id = model.litellm_model.split("/", 1)[-1]
    tokens = {t.lower() for text in (model.provider, model_id, lite_id)
              for chunk in _CHUNK.findall(text)
              for t in (chunk, (re.match(r"[A-Za-z]+", chunk) or [""])[0])}
    found = {family for family, (ids, _) in FAMILIES.items() if tokens & set(ids)}
    for ident in (model_id.lower(), lite_id.lower()):
        found |= _litellm_vendors().get(ident, frozenset())
    if model.provider in VENDORS and not model.declared:
        found.add(VENDORS[model.provider])
    return found


def family_terms(models: list[ResolvedModel]) -> list[str]:
    """Every name of the seats' families — its prose names, and its model-id tokens that
    are not ordinary words (``o4``, ``chatgpt``; not ``command``) — of every family when one
    seat's is unknown."""
    seated: set[str] = set()
    for m in models:
        found = families(m)
        if not found:
            seated = set(FAMILIES)
            break
        seated |= found
    names = {name for f in seated for name in FAMILIES[f][1]}
    said = {n.lower() for n in names}
    ids = {i for f in seated for i in FAMILIES[f][0] if i not in said
           and (any(c.isdigit() for c in i) or not is_ordinary(i))}
    return sorted(names | ids)


@functools.lru_cache(maxsize=1)
def ordinary_words() -> frozenset[str]:
    """English words as a dictionary lists them in lower case (no proper nouns)."""
    from english_words import get_english_words_set

    return frozenset(w for w in get_english_words_set(["web2"]) if w.islower())


def is_ordinary(word: str) -> bool:
    """An English word, or a plain inflection of one (web2 lists no plurals)."""
    w = word.lower()
    words = ordinary_words()
    if w in words or w in EVERYDAY:
        return True
    return any(w.endswith(s) and len(w) - len(s) >= 3 and (w[: -len(s)] in words
                                                           or w[: -len(s)] + "e" in words)
               for s in _INFLECTIONS)


def name_tokens(text: str) -> set[str]:
    """The distinctive tokens of a model name: ``qwen3-8b`` → {qwen3, qwen}."""
    out: set[str] = set()
    for chunk in _CHUNK.findall(text):
        letters = re.match(r"[A-Za-z]+", chunk)
        for token in {chunk, letters.group() if letters else ""}:
            if (len(token) >= MIN_TOKEN and re.search("[A-Za-z]", token)
                    and not _SIZE.fullmatch(token) and not is_ordinary(token)):
                out.add(token.lower())
    return out


def _catalogue_provider(model: ResolvedModel) -> bool:
    return not model.declared and model.provider not in ("local", "")


def identifying_terms(models: list[ResolvedModel]) -> list[str]:
    """Every identifier of ``models``, longest first (``openai/gpt-4o`` before ``gpt-4o``)."""
    terms: set[str] = set()
    for m in models:
        model_id = m.base_name.split("/", 1)[-1]
        lite_id = m.litellm_model.split("/", 1)[-1]
        terms |= {m.name, m.base_name, m.litellm_model}
        for ident in (model_id, lite_id):
            if len(ident) >= 3 or any(c.isdigit() for c in ident):  # "o1" yes, "a" no
                terms.add(ident)
        if len(m.provider) >= 3 and (not is_ordinary(m.provider) or _catalogue_provider(m)):
            terms.add(m.provider)
        terms |= name_tokens(f"{m.provider} {model_id} {lite_id}")
    terms |= set(family_terms(models))
    return sorted((t for t in terms if t), key=lambda t: (-len(t), t))
