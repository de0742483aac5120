"""The four tools as an MCP client lists them: names, descriptions, JSON Schemas.

Written for a model that has never heard of orch: each description says what the tool does,
what it costs and what comes back. Pure data (no SDK import), so tests and docs can read it.
"""

from __future__ import annotations

from typing import Any

from orchestrator.app.requests import DEFAULT_MAX_LEGS, MAX_TIMEOUT_MIN
from orchestrator.app.runs import STATUSES as RUN_STATUSES
from orchestrator.ledger.spend import GROUP_BY
from orchestrator.mcp_server.bounded import LIMIT_SCHEMA

_MODEL = {"type": "string", "minLength": 1, "maxLength": 300, "pattern": r"^[^,\s]+$",
          "description": "A model as PROVIDER/MODEL (e.g. openai/gpt-4o-mini, "
                         "anthropic/claude-haiku-4-5, or a provider declared in orch's "
                         "config such as myvllm/qwen3-8b), optionally @VARIANT, or an alias "
                         "from orch's config."}
_PROMPT = {"type": "string", "minLength": 1, "pattern": r"\S",
           "description": "The briefing every model receives, as plain text or Markdown. "
                          "Say what you want answered and in what form; the models see "
                          "nothing else of your conversation."}
_CONTEXT = {"type": "array", "maxItems": 100,
            "items": {"type": "string", "minLength": 1},
            "description": "Paths of files to append to the briefing (relative to the "
                           "directory orch mcp was started in, and inside that project: a "
                           "path outside it, through a symlink out, or to a credential "
                           "file such as .env is refused). Each is read once and "
                           "shared by every model; large files cost input tokens on every "
                           "model."}
_TIMEOUT = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT_MIN,
            "default": 10,
            "description": "Time limit per model call in MINUTES (default 10). A model "
                           "that runs out of time ends with status 'error'."}
_TOOLS = {"type": "string", "enum": ["read", "none"], "default": "read",
          "description": "'read' (default): models may call read-only tools (read, grep, "
                         "glob, list) confined to the git work tree orch mcp runs in, never "
                         "credential files. 'none': the models see only the briefing."}
_TAG = {"type": "string", "minLength": 1, "maxLength": 200,
        "description": "A label stored on every spend-ledger row of this call, so `spend` "
                       "with group_by 'tag' can add it up."}
_VALIDATE = {"type": "boolean",
             "description": "Default true: every model name (and the chair) is checked "
                            "against the provider's model list, or litellm's catalogue, "
                            "before any spend; a name neither has is refused with the "
                            "closest names. false sends the names as given (a model the "
                            "list does not show yet)."}

FANOUT = {
    "name": "fanout",
    "title": "Ask several models at once",
    "description": (
        "Send one briefing to several LLMs at once and get every answer back, with the "
        "tokens and dollars each one cost. Use it for a second (and third) opinion: each "
        "model answers independently and concurrently; optionally a 'chair' model then "
        "reads all the answers and writes one synthesis. Every model call is recorded in "
        "orch's spend ledger and in files under the returned runs_dir/wave_id. COSTS "
        "MONEY: each listed model is one paid call (more if it uses tools). Returns the "
        "wave document: wave_id, status (complete | partial "
        "| error | aborted), exit_code (0 all answered, 2 partial or a budget stopped "
        "work, 1 none answered), legs[] (model, status, reason, answer, usage, "
        "cost_usd), chair, usage, cost_usd, notices, budget_refusals, degraded. Progress "
        "notifications report each model as it starts and ends; cancelling the call "
        "aborts the wave and keeps what was already answered and billed."),
    "inputSchema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["prompt"],
        "properties": {
            "prompt": _PROMPT,
            "models": {"type": "array", "minItems": 1, "maxItems": DEFAULT_MAX_LEGS,
                       "items": _MODEL,
                       "description": "The models to ask, one answer each (at most "
                                      f"{DEFAULT_MAX_LEGS}). Omit to use a saved council or "
                                      "the default models in orch's config."},
            "council": {"type": "string", "minLength": 1,
                        "description": "Instead of models: the name of a model list saved "
                                       "with `orch council save`."},
            "context": _CONTEXT,
            "chair": {**_MODEL, "description": "Optional: a model that reads every answer "
                                               "and writes one synthesis (one more paid "
                                               "call). " + _MODEL["description"]},
            "tools": _TOOLS,
            "timeout_minutes": _TIMEOUT,
            "tag": _TAG,
            "validate_models": _VALIDATE,
            "rounds": {"type": "integer", "minimum": 1, "maximum": 20,
                       "description": "Deliberate over this many rounds (default 1: answer "
                                      "once). From round 2 each model reads the others' "
                                      "answers, anonymised, revises or keeps its own, and "
                                      "votes; it stops early when nobody changes or all "
                                      "agree. Up to rounds x models paid calls; the document "
                                      "gains rounds, stop and winner."},
            "peers": {"type": "integer", "minimum": 1,
                      "description": "With rounds: how many other answers each model reads a "
                                     "round (default all for up to 5 models, else 4)."},
            "aggregate": {"type": "string", "enum": ["vote"],
                          "description": "vote: also count the final answers, the majority "
                                         "over normalised answers (no extra call); the "
                                         "document gains aggregate (outcome majority | "
                                         "plurality | tie | none, winner, groups)."},
            "synthesis": {"type": "string", "enum": ["plain", "structured"],
                          "description": "With chair: structured asks the chair for the "
                                         "points of consensus, the disagreements with which "
                                         "answers hold each side, points one answer raised "
                                         "and a resolution; the document gains synthesis "
                                         "(answers by anonymous label, mapped to legs)."},
            "continue_wave": {"type": "string", "minLength": 1, "maxLength": 200,
                              "description": "Follow up on an earlier fanout: a wave_id (or "
                                             "'last') whose models each get prompt with their "
                                             "own earlier question and answer before it. Only "
                                             "the models that answered are asked; models, "
                                             "council and rounds do not apply. The document "
                                             "gains parent_wave_id."},
        },
    },
}

COUNCIL_RUN = {
    "name": "council_run",
    "title": "Review a change with a council of models",
    "description": (
        "A code or design review by several models (the 'seats'): each reviews the "
        "briefing (and the git diff, if given) and lists findings; the seats then judge "
        "each other's findings anonymously; a deterministic tally sorts findings into "
        "tiers by how many peers agreed; a 'chair' model that did not review writes the "
        "verdict: ship | fix-first | rethink. COSTS MONEY: about 2-3 paid calls per seat "
        "plus the chair, each reading the whole briefing and diff. Takes minutes. Returns run_id, status, exit_code, verdict, chair, "
        "tiers (count of findings per tier), top_findings (the most agreed-on first: "
        "tier, severity, location, claim, seats, votes), cost_usd, notices, and report "
        "(path of report.md; report.html beside it). Cancelling aborts the run and keeps "
        "what was already spent and written."),
    "inputSchema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["prompt"],
        "properties": {
            "prompt": {**_PROMPT, "description": "What the reviewers should look at and "
                                                 "for, e.g. 'Review this change for bugs "
                                                 "and missing tests.'"},
            "models": {"type": "array", "minItems": 2, "maxItems": DEFAULT_MAX_LEGS,
                       "items": _MODEL,
                       "description": "The seats: two or more models that review. Omit to "
                                      "use a saved council (council) or the defaults."},
            "council": {"type": "string", "minLength": 1,
                        "description": "Instead of models: a saved council's name."},
            "chair": {**_MODEL, "description": "The model that writes the verdict; it must "
                                               "not be a seat. Omit to use defaults.chair "
                                               "from orch's config. " + _MODEL["description"]},
            "diff": {"type": "string", "minLength": 1, "maxLength": 500,
                     "description": "A git revision range whose `git diff` is added to the "
                                    "briefing, run in orch mcp's directory, e.g. "
                                    "'main..HEAD' or 'HEAD~1'."},
            "context": _CONTEXT,
            "tools": _TOOLS,
            "timeout_minutes": _TIMEOUT,
            "tag": _TAG,
            "validate_models": _VALIDATE,
        },
    },
}

SPEND = {
    "name": "spend",
    "title": "What orch has spent",
    "description": (
        "Read orch's spend ledger: how many model calls ('legs'), tokens and US dollars "
        "were spent since a moment, optionally grouped. Free: reads a local database, "
        "calls no model. Returns legs, total_cost_usd (known costs only), "
        "unknown_cost_legs (when > 0 the total is a floor), failed_cost_usd, "
        "suspect_legs, and groups[] (key, legs, failed_legs, tokens, cost_usd) when "
        "group_by is given: at most 'limit' groups (default 20), with total and, when some "
        "were left out, left_out and a note. The same numbers as `orch spend --json`."),
    "inputSchema": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "since": {"type": "string", "minLength": 1, "default": "7d",
                      "description": "Only calls since then: '30m', '24h', '7d', '2w', an "
                                     "ISO date or datetime (UTC), or 'all'. Default '7d'."},
            "group_by": {"type": "string", "enum": list(GROUP_BY),
                         "description": "One group per model, day, wave, tag or status."},
            "limit": LIMIT_SCHEMA,
        },
    },
}

RUNS = {
    "name": "runs",
    "title": "Past fanouts and councils",
    "description": (
        "List orch's past runs (fanout waves, council reviews, benches), newest first, "
        "search them by the text of their prompts and answers, or show one in full. Free: "
        "reads local files and the ledger's index, calls no model. action 'list' returns "
        "runs[] (id, kind, status, legs, cost_usd, created_at, tag), the newest 'limit' "
        "(default 20), with total and, when some were left out, left_out and a note saying "
        "how to see them; action 'show' with "
        "an id returns that run's document, for a wave the same shape fanout returns; "
        "action 'search' with a query returns runs[] (id, kind, last_at, matches, question, "
        "models, hits[] each with a one-line snippet and the highlights' offsets), newest "
        "first, at most 'limit'. The same as `orch runs --json`, `orch runs show ID --json` "
        "and `orch runs search QUERY --json`."),
    "inputSchema": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "action": {"type": "string", "enum": ["list", "show", "search"],
                       "default": "list",
                       "description": "'list' (default), 'show' (needs id) or 'search' "
                                      "(needs query)."},
            "query": {"type": "string", "minLength": 1, "maxLength": 1000,
                      "description": "For 'search': words that must all match, \"a "
                                     "phrase\", OR between words, -word excluded, word* a "
                                     "prefix."},
            "id": {"type": "string", "minLength": 1, "maxLength": 200,
                   "description": "For 'show': a run id as 'list' gives it."},
            "since": {"type": "string", "minLength": 1,
                      "description": "For 'list' and 'search': only runs started (legs "
                                     "recorded) since '30m', '24h', '7d', '2w' or an ISO "
                                     "date."},
            "status": {"type": "array", "items": {"type": "string", "enum": list(RUN_STATUSES)},
                       "description": "For 'list': only runs with one of these statuses."},
            "limit": LIMIT_SCHEMA,
        },
    },
}

TOOLS: dict[str, dict[str, Any]] = {t["name"]: t for t in (FANOUT, COUNCIL_RUN, SPEND, RUNS)}
# Reading tools are free and change nothing; the other two spend money and write files.
READ_ONLY = {"spend", "runs"}

# The arguments each paid tool has of its own; any other argument is a plugin's option.
CORE_ARGUMENTS = {name: frozenset(TOOLS[name]["inputSchema"]["properties"])
                  for name in ("fanout", "council_run")}


def option_property(option) -> dict[str, Any]:
    """A plugin's declared option (orchestrator.options.Option) as a JSON Schema property."""
    prop: dict[str, Any] = {"type": {"int": "integer", "float": "number", "bool": "boolean",
                                     "str": "string", "choice": "string"}[option.type]}
    if option.type == "choice":
        prop["enum"] = list(option.choices)
    if option.type in ("int", "float"):
        if option.min is not None:
            prop["exclusiveMinimum" if option.min_open else "minimum"] = option.min
        if option.max is not None:
            prop["maximum"] = option.max
    prop["description"] = option.mcp_help or option.described
    return prop


# Where a paid tool's description says how to cap its cost, when a plugin declares a run
# ceiling (Option.run_ceiling: the cost_ceiling plugin's): after this text, "; use ARG ...".
CEILING_HINT = {"fanout": "(more if it uses tools)",
                "council_run": "each reading the whole briefing and diff"}


def ceiling_arguments(options: list) -> list[str]:
    """The MCP arguments of the run ceilings among ``options`` ([(plugin, Option)])."""
    return [o.key for _, o in options if o.run_ceiling and o.mcp]


def with_options(declared: dict[str, list]) -> dict[str, dict[str, Any]]:
    """TOOLS with each paid tool's plugin options ({tool: [(plugin, Option)]}) added as
    properties (a core argument of the same name stays the core's), and its description
    naming the run ceiling argument, if any, that caps its cost."""
    tools = dict(TOOLS)
    for name, options in declared.items():
        extra = {o.key: option_property(o) for _, o in options
                 if o.mcp and o.key not in CORE_ARGUMENTS[name]}
        if extra:
            schema = TOOLS[name]["inputSchema"]
            tools[name] = {**TOOLS[name], "inputSchema": {
                **schema, "properties": {**schema["properties"], **extra}}}
        caps = [key for key in ceiling_arguments(options) if key in extra]
        if caps:
            anchor = CEILING_HINT[name]
            tools[name]["description"] = tools[name]["description"].replace(
                anchor, f"{anchor}; use {' or '.join(caps)} to cap the total", 1)
    return tools


def option_arguments(declared: dict[str, list]) -> dict[str, dict[str, str]]:
    """{tool: {flag: argument}} for the plugins' options each paid tool takes (``--max-words``
    -> ``max_words``), from the same declarations as its schema: an error a shared check
    words with the flag is said to an MCP client with the argument (wording.py)."""
    return {name: {o.flag: o.key for _, o in options
                   if o.mcp and o.key not in CORE_ARGUMENTS[name]}
            for name, options in declared.items()}


def plugin_declarations() -> dict[str, list]:
    """{tool: [(plugin, Option)]}: the enabled plugins' ``register_options``, per paid tool."""
    from orchestrator import runtime
    from orchestrator.plugin_host.declared import declared_options
    from orchestrator.plugin_host.plugins import load

    pm = load(runtime.config().section("plugins"), options_only=True)
    return {name: declared_options(pm, name) for name in CORE_ARGUMENTS}


def plugin_tools(declared: dict[str, list] | None = None) -> dict[str, dict[str, Any]]:
    """TOOLS as the enabled plugins extend them (their ``register_options``)."""
    return with_options(plugin_declarations() if declared is None else declared)
