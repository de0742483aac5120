"""``orch doctor``'s checks: what is wrong with a set-up, one row per check with its fix.

Each check returns :class:`Check` rows (``ok``, ``warn`` or ``fail``). Only names are ever
read from the environment's key variables, never shown as values; every row is scrubbed.
Network checks cost nothing: ``GET /models``, 3 s at most per provider.
"""

from __future__ import annotations

import copy
import json
import os
import platform
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from orchestrator import __version__, keys
from orchestrator import config as config_mod
from orchestrator.errors import OrchError
from orchestrator.security.secrets import has_url_credentials, mask_url

OK, WARN, FAIL = "ok", "warn", "fail"
PROBE_TIMEOUT_S = 3.0
OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION"}
THINKING_KEYS = ("reasoning_effort", "thinking")

def _config_schema() -> dict[str, Any]:
    """The shape config.json is loaded against (config_schema.SCHEMA), plus what doctor alone
    asks: a provider names its base_url."""
    from orchestrator.config_schema import SCHEMA

    schema = copy.deepcopy(SCHEMA)
    schema["properties"]["providers"]["additionalProperties"]["required"] = ["base_url"]
    return schema


@dataclass
class Check:
    section: str
    name: str
    status: str
    detail: str
    fix: str | None = None
    code: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        doc = {"section": self.section, "check": self.name, "status": self.status,
               "detail": self.detail, "fix": self.fix}
        if self.code:
            doc["code"] = self.code
        return doc


# -- environment ----------------------------------------------------------------------------

def environment() -> tuple[list[Check], config_mod.Config | None]:
    rows = [Check("environment", "python", OK, platform.python_version()),
            Check("environment", "orch", OK, __version__)]
    home = config_mod.home()
    if not home.exists():
        rows.append(Check("environment", "ORCH_HOME", WARN, f"{home} does not exist yet",
                          "it is created on the first run; or set ORCH_HOME"))
    elif not home.is_dir():
        rows.append(Check("environment", "ORCH_HOME", FAIL, f"{home} is not a directory",
                          "point ORCH_HOME at a directory (or move that file away)"))
    elif not os.access(home, os.W_OK | os.X_OK):
        rows.append(Check("environment", "ORCH_HOME", FAIL, f"{home} is not writable",
                          f"chmod u+w {home}, or point ORCH_HOME elsewhere"))
    else:
        rows.append(Check("environment", "ORCH_HOME", OK, f"{home} (writable)"))
    cfg = None
    try:
        cfg = config_mod.Config.load(validate=False)  # every problem as a row, not the first
    except OrchError as exc:
        rows.append(Check("environment", "config.json", FAIL, str(exc),
                          "fix the file, or move it away to start from an empty config"))
    if cfg is not None:
        rows += config_rows(cfg)
        for name in config_mod.SECTIONS:  # reported above; the other checks read it as empty
            if not isinstance(cfg.data.get(name), dict):
                cfg.data[name] = {}  # in memory only: doctor never saves the config
    for var, want in OFFLINE.items():
        have = os.environ.get(var)
        if have is None or have == want:
            rows.append(Check("environment", var, OK, f"{want}" + (" (orch sets it)" if have
                                                                   is None else "")))
        else:
            rows.append(Check("environment", var, WARN, f"set to {have!r}, not {want!r}",
                              f"export {var}={want} (or unset it: orch sets it)"))
    rows.append(ledger_row())
    return rows, cfg


def config_rows(cfg: config_mod.Config) -> list[Check]:
    """Every problem in config.json as its key path (jsonschema), then unknown sections."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(_config_schema())
    rows = []
    for error in sorted(validator.iter_errors(cfg.data), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        rows.append(Check("environment", f"config {where}", FAIL, error.message,
                          f"fix {where} in {cfg.path}"))
    from orchestrator.models.names import config_problems

    for where, problem, fix in config_problems(cfg.data):  # what loading refuses, each named
        rows.append(Check("environment", f"config {where}", FAIL, problem, fix))
    for key in sorted(set(cfg.data) - {*config_mod.SECTIONS, *config_mod.SETTINGS}):
        rows.append(Check("environment", f"config {key}", WARN, "an unknown section "
                          "(a typo, or from a newer orch)", f"remove or rename {key}"))
    if not rows:
        state = "valid" if cfg.path.exists() else "absent (empty config)"
        rows.append(Check("environment", "config.json", OK, f"{cfg.path} {state}"))
    return rows


def ledger_row() -> Check:
    """The ledger opens and reads (read-only: doctor never creates one)."""
    from orchestrator.ledger import spend as ledger

    url = ledger.default_url()
    if not url.startswith("sqlite:///"):
        return server_ledger_row(url)
    path = url.removeprefix("sqlite:///")
    if not os.path.exists(path):
        return Check("environment", "ledger", OK, f"{path}: none yet (made on the first run)")
    import sqlite3

    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=3)
        try:
            tables = {r[0] for r in con.execute("select name from sqlite_master "
                                                "where type='table'")}
            rows = con.execute("select count(*) from spend").fetchone()[0] \
                if "spend" in tables else 0
            waiting = sum(con.execute(f"select count(*) from {t}").fetchone()[0]
                          for t in tables if "outbox" in t)
            revision = con.execute("select version_num from alembic_version").fetchone()[0] \
                if "alembic_version" in tables else None
        finally:
            con.close()
    except sqlite3.Error as exc:
        return Check("environment", "ledger", FAIL, f"{path} does not open: {exc}",
                     "move the file away (orch makes a new one) or restore it")
    if waiting:
        return Check("environment", "ledger", WARN, f"{path}: {rows} rows, {waiting} in the "
                     "outbox", "run any orch command that spends; the outbox drains then")
    stale = _stale_schema(revision, bool(tables & {"spend", "council"}))
    if stale:
        return Check("environment", "ledger", WARN, f"{path}: {rows} rows, {stale}",
                     "run orch ledger upgrade")
    return Check("environment", "ledger", OK, f"{path}: {rows} rows")


def _stale_schema(revision: str | None, tables: bool) -> str | None:
    from orchestrator.ledger.schema import HEAD

    if revision == HEAD or (revision is None and not tables):
        return None
    return f"schema at revision {revision or '(none)'}, this orch needs {HEAD}"


def server_ledger_row(url: str) -> Check:
    """A ledger on a database server (PostgreSQL): reachable, its schema, its rows. The URL
    is shown with its password masked, and so is any error."""
    import sqlalchemy as sa

    from orchestrator.ledger import connection as ledger_engine
    from orchestrator.ledger import migrate as ledger_migrate

    where = ledger_engine.redact(url)
    try:
        with ledger_engine.engine(sa.make_url(url)).connect() as conn:
            revision, tables = ledger_migrate.state(conn)
            rows = conn.execute(sa.text("select count(*) from spend")).scalar() \
                if tables else 0
    except ImportError as exc:
        return Check("environment", "ledger", FAIL, f"{where}: driver not installed "
                     f"({exc.name})", "pip install 'orch[postgres]'")
    except Exception as exc:  # noqa: BLE001 - any failure to reach it is the finding
        return Check("environment", "ledger", FAIL, f"{where} does not answer: "
                     f"{ledger_engine.brief(exc, url)}",
                     "check ORCH_LEDGER_URL and that the database server is up (rows wait "
                     "in the outbox meanwhile)")
    from orchestrator.ledger import outbox

    waiting = outbox.pending(url)
    stale = _stale_schema(revision, tables)
    if stale:
        return Check("environment", "ledger", WARN, f"{where}: {rows} rows, {stale}",
                     "run orch ledger upgrade")
    if waiting:
        return Check("environment", "ledger", WARN, f"{where}: {rows} rows, {waiting} in the "
                     "outbox", "run any orch command that opens the ledger; it drains then")
    return Check("environment", "ledger", OK, f"{where}: {rows} rows"
                 + ("" if tables else " (empty: made on the first run)"))


# -- providers ------------------------------------------------------------------------------

def probe_models(base_url: str, key: str | None) -> tuple[list[str] | None, str]:
    """(model ids, "") or (None, why): ``GET {base_url}/models`` within 3 s."""
    entries, why = probe_model_entries(base_url, key)
    if entries is None:
        return None, why
    return [str(m.get("id")) for m in entries if isinstance(m, dict) and m.get("id")], ""


def probe_model_entries(base_url: str, key: str | None) -> tuple[list[dict] | None, str]:
    """(the ``data`` entries, "") or (None, why): ``GET {base_url}/models`` within 3 s."""
    request = urllib.request.Request(base_url.rstrip("/") + "/models")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as answer:
            body = json.loads(answer.read(4 << 20) or b"{}")
    except urllib.error.HTTPError as exc:
        return None, f"HTTP {exc.code}" + (" (the key was refused)" if exc.code in (401, 403)
                                           else "")
    except (TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return None, f"no answer within {PROBE_TIMEOUT_S:g} s" if isinstance(
            reason, TimeoutError) else f"unreachable ({type(reason).__name__})"
    except ValueError:
        return None, "the answer is not JSON"
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None, "the answer has no model list (`data`)"
    return [m for m in data if isinstance(m, dict)], ""


def providers(cfg: config_mod.Config) -> tuple[list[Check], dict[str, list[str]]]:
    """Per declared provider: its key variable, its endpoint and the models it lists."""
    rows, listed = [], {}
    if not cfg.providers:
        rows.append(Check("providers", "declared", OK, "none (litellm names and local/ only)",
                          "orch provider add NAME --base-url URL"))
    for pid, entry in sorted(cfg.providers.items()):
        if not isinstance(entry, dict) or not isinstance(entry.get("base_url"), str):
            continue  # the config rows already say what is wrong
        from orchestrator.models.names import provider_problem

        if provider_problem(pid):
            continue  # a config row names it; never probed under a name it cannot keep
        section = f"provider {pid}"
        var = entry.get("api_key_env")
        key = keys.read(var)
        if not var:
            rows.append(Check(section, "key", OK, "no key needed (no api_key_env)"))
        elif key:
            rows.append(Check(section, "key", OK, f"${var} is set"))
        else:
            rows.append(Check(section, "key", FAIL, f"${var} is not set",
                              f"export {var}=... (the key for {pid})"))
        url = mask_url(entry["base_url"])
        if has_url_credentials(entry["base_url"]):  # never probed: urllib would send them
            rows.append(Check(section, "endpoint", FAIL, f"{url}: credentials in the base URL: "
                              "move them to --api-key-env",
                              f"export {pid.upper()}_API_KEY=... then orch provider add {pid} "
                              f"--base-url URL-WITHOUT-THEM --api-key-env {pid.upper()}_API_KEY"))
            continue
        models, why = probe_models(entry["base_url"], key)
        if models is None:
            fix = (f"export {var}" if why.startswith("HTTP 40") and var else
                   f"start the server at {url}, or fix it: orch provider add "
                   f"{pid} --base-url URL")
            rows.append(Check(section, "endpoint", FAIL, f"GET {url}/models: {why}", fix))
            continue
        listed[pid] = models
        shown = ", ".join(models[:8]) + (f" (+{len(models) - 8})" if len(models) > 8 else "")
        rows.append(Check(section, "endpoint", OK, f"answers; lists {len(models)} model(s)"
                          + (f": {shown}" if models else ""), data={"models": models}))
    return rows, listed


# -- aliases, councils, variants ------------------------------------------------------------

def addressed(cfg: config_mod.Config) -> list[tuple[str, str]]:
    """(where, model spec) for every alias and saved council member."""
    found = [(f"alias {name}", name) for name, target in sorted(cfg.aliases.items())
             if isinstance(target, str)]  # a wrong type is already a config row
    for council, members in sorted(cfg.councils.items()):
        if isinstance(members, list):
            found += [(f"council {council}", m) for m in members if isinstance(m, str)]
    return found


def names(cfg: config_mod.Config, pm, listed: dict[str, list[str]]) -> list[Check]:
    """Each alias and council member resolves, is listed by its provider (when it answered),
    has its key, and its variant fits what the model declares."""
    from orchestrator.models.addressing import check_key
    from orchestrator.models.catalog import model_info
    from orchestrator.models.resolve import resolve_all

    rows = []
    for where, spec in addressed(cfg):
        try:
            model = resolve_all([spec], cfg, pm, warn=lambda line: None)[0]
        except Exception as exc:  # OrchError, or a config shape resolution cannot read
            rows.append(Check(where, spec, FAIL, str(exc), "fix it with `orch alias set` or "
                              "`orch council save`"))
            continue
        _, _, remote = model.base_name.partition("/")
        if model.declared and model.provider in listed and remote not in listed[model.provider]:
            rows.append(Check(where, spec, WARN, f"{model.base_name}: {model.provider} does "
                              f"not list {remote}", f"check the name against `orch models "
                              f"{model.provider}/`"))
        else:
            try:
                check_key(model)
            except OrchError as exc:
                rows.append(Check(where, spec, FAIL, str(exc), "export the key variable"))
            else:
                rows.append(Check(where, spec, OK, f"resolves to {model.name}"))
        if model.variant:
            declared = cfg.providers.get(model.provider) if model.declared else None
            rows += variant_rows(where, model, model_info(model, declared))
    return rows


def variant_rows(where: str, model, info) -> list[Check]:
    """``VARIANT_UNDECLARED`` / ``VARIANT_OVER_BUDGET``: what the run would refuse."""
    sampling, rows = model.sampling, []
    label = f"@{model.variant}"
    if any(k in sampling for k in THINKING_KEYS) and not info.supports_reasoning:
        rows.append(Check(where, label, FAIL, f"{model.name}: the variant asks for thinking; "
                          f"{model.base_name} does not declare reasoning support",
                          "declare supports_reasoning: true on the provider, or drop "
                          "the thinking setting from the variant", code="VARIANT_UNDECLARED"))
    asked = sampling.get("max_tokens") or sampling.get("max_completion_tokens")
    thinking = (sampling.get("thinking") or {}).get("budget_tokens") if isinstance(
        sampling.get("thinking"), dict) else None
    total = int(asked or 0) + int(thinking or 0)
    if total and info.max_output_tokens is None:
        rows.append(Check(where, label, WARN, f"{model.name}: the variant reserves {total} "
                          f"output tokens; {model.base_name} declares no output ceiling",
                          "declare max_output_tokens on the provider", code="VARIANT_UNDECLARED"))
    elif total and total > info.max_output_tokens:
        rows.append(Check(where, label, FAIL, f"{model.name}: the variant reserves {total} "
                          f"output tokens, over the model's ceiling {info.max_output_tokens}",
                          f"lower max_tokens in variants.{model.variant} to "
                          f"{info.max_output_tokens} or less", code="VARIANT_OVER_BUDGET"))
    return rows


# -- plugins --------------------------------------------------------------------------------

def output_budget_rows(cfg: config_mod.Config, pm) -> list[Check]:
    """With ``plugin_config.output_budget.tokens`` set: the addressed routes where no output
    ceiling is known (the budget is sent as is) and where it is above half the window."""
    from orchestrator.models.catalog import model_info
    from orchestrator.models.resolve import resolve_all

    budget = cfg.plugin_config("output_budget").get("tokens")
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1 \
            or not pm.loaded("output_budget"):
        return []
    specs = {spec for _, spec in addressed(cfg)}
    specs |= {m for m in cfg.defaults.get("models") or [] if isinstance(m, str)}
    rows = []
    for spec in sorted(specs):
        try:
            model = resolve_all([spec], cfg, pm, warn=lambda line: None)[0]
        except Exception:
            continue  # the names rows say what is wrong
        declared = cfg.providers.get(model.provider) if model.declared else None
        info = model_info(model, declared)
        if info.max_output_tokens is None:
            rows.append(Check("output budget", spec, WARN, f"{model.name}: no output ceiling "
                              f"is known, so the budget of {budget} is sent as is",
                              f"set providers.{model.provider}.max_output_tokens if the "
                              "provider caps answers"))
        if info.context_window and budget > info.context_window // 2:
            rows.append(Check("output budget", spec, WARN, f"{model.name}: the budget of "
                              f"{budget} is above half its {info.context_window}-token window; "
                              "the context guard will cut it on long conversations",
                              "lower plugin_config.output_budget.tokens"))
    return rows


def plugins(cfg: config_mod.Config) -> tuple[list[Check], Any]:
    from orchestrator.plugin_host.plugins import load, selection

    section = cfg.section("plugins")
    pm = load(section)
    rows = []
    for info in sorted(pm.infos.values(), key=lambda i: (not i.builtin, i.name)):
        where = info.name
        if info.status == "broken":
            rows.append(Check("plugins", where, FAIL, info.error or "broken",
                              f"fix or uninstall {info.source}, or ORCH_DISABLE_PLUGINS="
                              f"{info.name}"))
        elif info.status == "disabled":
            rows.append(Check("plugins", where, OK, info.reason or "disabled"))
        else:
            rows.append(Check("plugins", where, OK, f"loaded ({info.source})"))
        for warning in info.warnings:
            rows.append(Check("plugins", where, WARN, warning, "fix the hook's name or marker"))
    allow, deny = selection(section)
    known = {i.name for i in pm.infos.values()}
    for name in sorted({*(allow or ()), *deny} - known):
        rows.append(Check("plugins", "settings", WARN, f"{name!r} is named in the plugin "
                          "settings but matches no installed plugin", "fix the name (typo?)"))
    from orchestrator.plugin_host.config_check import problems

    for name, line in problems(cfg, pm):
        rows.append(Check("plugins", name, FAIL, line, f"fix it in {cfg.path} (or remove the "
                          "key)"))
    rows += output_budget_rows(cfg, pm)
    for name in sorted(set(cfg.section("plugin_config")) - known):
        rows.append(Check("plugins", "settings", WARN, f"plugin_config.{name} matches no "
                          "installed plugin", "fix the name (typo?) or remove the section"))
    return rows, pm
