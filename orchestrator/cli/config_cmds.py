"""``orch provider`` and ``orch alias``: edit the providers and aliases sections of config.json.

Key values never pass through here: a provider records the *name* of the environment variable
that holds its key, and the key is read from the environment only when a model is called.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import click

from orchestrator import keys
from orchestrator.config import Config
from orchestrator.errors import OrchError, UsageProblem
from orchestrator.models.addressing import resolve
from orchestrator.models.names import NAME_RE, RESERVED_PROVIDERS, provider_problem  # noqa: F401
from orchestrator.security.secrets import mask_url

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# How common API keys start; with these the value is a key whatever its length.
KEY_PREFIXES = ("sk-", "sk_", "AIza", "xai-", "gsk_", "ghp_", "github_pat_", "nvapi-", "pplx-")


# Query parameters that carry a credential: ?key=, ?api_key=, ?apikey=, ?token=, ?sig=...
_CREDENTIAL_PARAM = re.compile(r"^(key|sig|signature|code|auth|password|pass)$|key|token|"
                               r"secret|credential|passw", re.I)


def check_name(kind: str, name: str) -> str:
    """Refuse names that would break model specs or council lists."""
    if not NAME_RE.match(name):
        bad = "".join(sorted({c for c in name if c in "/@, "}))
        why = f" (it contains {bad!r})" if bad else ""
        raise UsageProblem(
            f"{kind} name {name!r} is not a simple name{why}; use letters, digits, - _ ."
        )
    return name


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2))


def _looks_like_key(value: str) -> bool:
    if value.startswith(KEY_PREFIXES):
        return True
    if not ENV_NAME_RE.match(value):
        return True  # `-`, `.`, `/`, `=`... are in keys, never in a variable you can export
    # Variable names are short words joined by `_`; keys are long unbroken random runs.
    if any(len(word) > 20 for word in value.split("_")):
        return True
    mixed_case = value != value.upper() and value != value.lower()
    return mixed_case and len(value) >= 24


def _key_env_name_for(provider_id: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", provider_id.upper()).strip("_") + "_API_KEY"


def _check_key_env(provider_id: str, value: str) -> str:
    # Never echo `value`: if it is a key, repeating it would print it to the terminal and logs.
    if not value:
        raise UsageProblem("--api-key-env needs the name of an environment variable, e.g. MY_API_KEY")
    if value.startswith("$") and ENV_NAME_RE.match(value[1:]):
        value = value[1:]  # a quoted '$VAR' means the variable VAR
    if _looks_like_key(value):
        env = _key_env_name_for(provider_id)
        raise UsageProblem(
            "--api-key-env takes the NAME of an environment variable, not the key itself, and "
            f"that value looks like a key, so nothing was saved; run `export {env}=...` and pass "
            f"--api-key-env {env}"
        )
    return value


def _check_base_url(url: str) -> str:
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageProblem(
            f"base URL {url!r} must start with http:// or https:// and name a host, "
            "e.g. http://127.0.0.1:8000/v1"
        )
    # Never echo the URL here: the credential would be printed.
    if "@" in parts.netloc:
        raise UsageProblem(
            "base URL must not carry credentials (user:password@ or token@ before the host); "
            "put the key in an environment variable and pass its name with --api-key-env"
        )
    keys = sorted({k for k, _ in parse_qsl(parts.query, keep_blank_values=True)
                   if _CREDENTIAL_PARAM.search(k)})
    if keys:
        raise UsageProblem(
            f"base URL must not carry a credential in its query ({', '.join(keys)}=...); put "
            "the key in an environment variable and pass its name with --api-key-env"
        )
    return url


def _check_cost(flag: str, value: float) -> float:
    """A price: a finite number of dollars per million tokens, at least 0 (the check every
    face shares, orchestrator/option_values.py)."""
    from orchestrator.option_values import BadValue, number

    try:
        return number(value, min=0)
    except BadValue as exc:
        raise UsageProblem(f"{flag}: {exc.problem} (dollars per million tokens)") from None


def _describe_provider(pid: str, entry: dict[str, Any]) -> str:
    parts = [pid, mask_url(entry.get("base_url")) or "?"]
    env = entry.get("api_key_env")
    if env:
        parts.append(f"key ${env} ({'set' if keys.is_set(env) else 'unset'})")
    else:
        parts.append("no key")
    if "input_cost_per_mtok" in entry:
        parts.append(f"${entry['input_cost_per_mtok']:g} in / "
                     f"${entry['output_cost_per_mtok']:g} out per Mtok")
    if "max_output_tokens" in entry:
        parts.append(f"max output {entry['max_output_tokens']}")
    return "  ".join(parts)


def _users_of(config: Config, prefix: str | None = None, alias: str | None = None) -> list[str]:
    """Aliases and councils that mention a provider (by prefix) or an alias (by name)."""

    def hits(spec: str) -> bool:
        base = spec.split("@", 1)[0]
        if prefix is not None:
            return base.startswith(prefix + "/")
        return base == alias

    users = [f"alias {n}" for n, t in sorted(config.aliases.items()) if hits(t)]
    users += [f"council {n}" for n, ms in sorted(config.councils.items())
              if any(hits(m) for m in ms)]
    return users


# --------------------------------------------------------------------------- provider


@click.group()
def provider() -> None:
    """Declare OpenAI-compatible endpoints (vLLM, llama.cpp, LM Studio, a proxy...).

    A declared provider ID makes every model on that endpoint addressable as ID/MODEL.
    Models of litellm's own providers (openai/..., anthropic/..., ollama/...) need no
    declaration: they use litellm's usual environment variables.

    \b
    Example:
      orch provider add myvllm --base-url http://127.0.0.1:8000/v1
      orch fanout --models myvllm/qwen3-8b,openai/gpt-4o-mini --prompt "..."
    """


@provider.command("add")
@click.argument("provider_id", metavar="ID")
@click.option("--base-url", required=True, metavar="URL",
              help="The endpoint's OpenAI-compatible base URL, usually ending in /v1.")
@click.option("--api-key-env", metavar="VAR",
              help="NAME of the environment variable holding the key (never the key itself).")
@click.option("--input-cost-per-mtok", type=float, metavar="X",
              help="Dollars per million input tokens (give both cost flags or neither).")
@click.option("--output-cost-per-mtok", type=float, metavar="Y",
              help="Dollars per million output tokens.")
@click.option("--max-output-tokens", type=int, metavar="N",
              help="Largest completion the endpoint allows.")
def provider_add(provider_id: str, base_url: str, api_key_env: str | None,
                 input_cost_per_mtok: float | None, output_cost_per_mtok: float | None,
                 max_output_tokens: int | None) -> None:
    """Declare (or replace) the OpenAI-compatible endpoint ID.

    Its models are then called ID/MODEL; orch sends them to litellm as openai/MODEL with
    this base URL, reading the key from $VAR at call time. Costs are used by `orch spend`;
    leave them out when unknown, or pass 0 for a free local server.

    \b
    Examples:
      orch provider add myvllm --base-url http://127.0.0.1:8000/v1 \\
          --input-cost-per-mtok 0 --output-cost-per-mtok 0 --max-output-tokens 8192
      export TOGETHER_KEY=...
      orch provider add tg --base-url https://api.together.xyz/v1 --api-key-env TOGETHER_KEY
    """
    check_name("provider", provider_id)
    problem = provider_problem(provider_id)  # the rule config.json is loaded with
    if problem:
        raise UsageProblem(f"{problem}; pick another ID, e.g. my-{provider_id.lower()}")
    entry: dict[str, Any] = {"base_url": _check_base_url(base_url)}
    if api_key_env is not None:
        entry["api_key_env"] = _check_key_env(provider_id, api_key_env.strip())
    if (input_cost_per_mtok is None) != (output_cost_per_mtok is None):
        raise UsageProblem(
            "give both --input-cost-per-mtok and --output-cost-per-mtok, or neither"
        )
    if input_cost_per_mtok is not None and output_cost_per_mtok is not None:
        entry["input_cost_per_mtok"] = _check_cost("--input-cost-per-mtok", input_cost_per_mtok)
        entry["output_cost_per_mtok"] = _check_cost("--output-cost-per-mtok",
                                                    output_cost_per_mtok)
    if max_output_tokens is not None:
        if max_output_tokens < 1:
            raise UsageProblem(f"--max-output-tokens must be at least 1, got {max_output_tokens}")
        entry["max_output_tokens"] = max_output_tokens

    config = Config.load()
    old = config.providers.get(provider_id)
    config.providers[provider_id] = entry
    config.save()
    if old is not None:
        click.echo(f"replaced provider {provider_id} (was {mask_url(old.get('base_url')) or '?'})")
    else:
        click.echo(f"added provider {provider_id}; address its models as {provider_id}/MODEL")
    if "api_key_env" in entry and not keys.is_set(entry["api_key_env"]):
        click.echo(f"note: ${entry['api_key_env']} is not set in this shell; "
                   "set it before calling these models", err=True)


@provider.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list on stdout.")
def provider_list(as_json: bool) -> None:
    """List declared providers (key variable names only, never key values).

    \b
    Example:
      orch provider list
      orch provider list --json | jq '.[].id'
    """
    providers = Config.load().providers
    if as_json:
        echo_json([{"id": pid, **providers[pid],
                    "base_url": mask_url(providers[pid].get("base_url")),
                    "api_key_set": keys.is_set(providers[pid].get("api_key_env"))}
                   for pid in sorted(providers)])
        return
    if not providers:
        click.echo("no providers declared; add one with `orch provider add ID --base-url URL`")
        return
    width = max(len(pid) for pid in providers)
    for pid in sorted(providers):
        click.echo(_describe_provider(pid.ljust(width), providers[pid]))


@provider.command("remove")
@click.argument("provider_id", metavar="ID")
def provider_remove(provider_id: str) -> None:
    """Forget the provider ID (its ID/MODEL names stop working).

    \b
    Example:
      orch provider remove myvllm
    """
    config = Config.load(validate=False)
    config.remove("providers", provider_id, "provider", "declared")
    click.echo(f"removed provider {provider_id}")
    users = _users_of(config, prefix=provider_id)
    if users:
        click.echo(f"note: still used by {', '.join(users)}", err=True)


# --------------------------------------------------------------------------- alias


@click.group()
def alias() -> None:
    """Short names for models: `fast` instead of `myvllm/qwen3-8b@cold`.

    An alias works anywhere a model name does, including with a variant (fast@hot).

    \b
    Example:
      orch alias set fast myvllm/qwen3-8b
      orch fanout --models fast,fast@hot,openai/gpt-4o-mini --prompt "..."
    """


@alias.command("set")
@click.argument("name")
@click.argument("model")
def alias_set(name: str, model: str) -> None:
    """Make NAME stand for MODEL (a model name, another alias, optionally @VARIANT).

    Refused if MODEL does not resolve, e.g. when the aliases would form a loop.

    \b
    Examples:
      orch alias set fast myvllm/qwen3-8b
      orch alias set wild fast@hot
      orch alias set mini openai/gpt-4o-mini
    """
    check_name("alias", name)
    model = model.strip()
    config = Config.load()
    old = config.aliases.get(name)
    config.aliases[name] = model
    try:
        resolved = resolve(name, config)
    except OrchError as exc:  # a loop or a bad target: refuse before anything is saved
        raise UsageProblem(f"alias {name}: {exc}") from None
    config.save()
    verb = f"replaced alias {name} (was {old})" if old is not None else f"alias {name}"
    shown = f" = {resolved.name}" if resolved.name != model else ""
    click.echo(f"{verb} -> {model}{shown}")


@alias.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list on stdout.")
def alias_list(as_json: bool) -> None:
    """List aliases and what each resolves to.

    \b
    Example:
      orch alias list
      orch alias list --json
    """
    config = Config.load()
    rows = []
    for name in sorted(config.aliases):
        try:
            target, error = resolve(name, config).name, None
        except OrchError as exc:  # a hand-edited config may hold a broken alias: show, don't die
            target, error = None, str(exc)
        rows.append({"name": name, "model": config.aliases[name], "resolves_to": target,
                     **({"error": error} if error else {})})
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no aliases; add one with `orch alias set NAME MODEL`")
        return
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        tail = ""
        if r.get("error"):
            tail = f"  (broken: {r['error']})"
        elif r["resolves_to"] != r["model"]:
            tail = f"  (= {r['resolves_to']})"
        click.echo(f"{r['name']:<{width}}  -> {r['model']}{tail}")


@alias.command("remove")
@click.argument("name")
def alias_remove(name: str) -> None:
    """Delete the alias NAME.

    \b
    Example:
      orch alias remove fast
    """
    config = Config.load()
    config.remove("aliases", name, "alias", "defined")
    click.echo(f"removed alias {name}")
    users = _users_of(config, alias=name)
    if users:
        click.echo(f"note: still used by {', '.join(users)}", err=True)
