"""``orch doctor``: what is wrong with this set-up, one row per check, each with its fix."""

from __future__ import annotations

import click

from orchestrator.cli.common import print_json

MARK = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@click.option("--deep", is_flag=True,
              help="Also start the local server and generate one token.")
def doctor(as_json: bool, deep: bool) -> None:
    """Check the set-up: environment, config.json, the ledger, each provider (its key
    variable, `GET /models` within 3 s), every alias and saved council, variants, the local
    model and plugins. Exit 1 if any check fails. Key values are never shown, only names.

    \b
    Examples:
      orch doctor
      orch doctor --json | jq '.checks[] | select(.status != "ok")'
    """
    from orchestrator.operations import doctor as checks
    from orchestrator.operations.doctor_local import local_rows
    from orchestrator.security.secrets import scrub

    rows, cfg = checks.environment()
    if cfg is not None:
        provider_rows, listed = _guarded("providers", lambda: checks.providers(cfg), ([], {}))
        plugin_rows, pm = _guarded("plugins", lambda: checks.plugins(cfg), ([], None))
        rows += provider_rows
        from orchestrator.operations.doctor_keys import key_rows

        rows += _guarded("vendor keys", key_rows, [])
        rows += _guarded("names", lambda: checks.names(cfg, pm, listed), [])
        rows += _guarded("local", lambda: local_rows(cfg, deep), [])
        rows += plugin_rows
    rows += _guarded("daemon", _daemon_rows, [])
    counts = {s: sum(1 for r in rows if r.status == s) for s in ("ok", "warn", "fail")}
    if as_json:
        print_json({"ok": counts["fail"] == 0, "counts": counts,
                    "checks": [_clean(r.to_dict(), scrub) for r in rows]})
    else:
        section = None
        for row in rows:
            if row.section != section:
                section = row.section
                click.echo(section)
            code = f"{row.code}: " if row.code else ""
            click.echo(scrub(f"  {MARK[row.status]}  {row.name}: {code}{row.detail}"))
            if row.fix and row.status != "ok":
                click.echo(scrub(f"          fix: {row.fix}"))
        click.echo(f"{counts['ok']} ok, {counts['warn']} warn, {counts['fail']} fail")
    if counts["fail"]:
        raise SystemExit(1)


def _daemon_rows() -> list:
    """Whether runs start warm here (orch serve), and if not, why and what to do."""
    from orchestrator.daemon.client import warmth
    from orchestrator.operations.doctor import Check

    status, detail, fix = warmth()
    return [Check("daemon", "orch serve", status, detail, fix)]


def _guarded(section: str, check, empty):
    """A check that cannot run is a ``fail`` row of its own; the other checks still run."""
    try:
        return check()
    except Exception as exc:
        from orchestrator.operations.doctor import FAIL, Check

        row = Check(section, "check", FAIL, f"could not run: {type(exc).__name__}: {exc}",
                    "fix what it names, then run orch doctor again")
        if isinstance(empty, tuple):
            return ([row], *empty[1:])
        return [row]


def _clean(doc: dict, scrub) -> dict:
    return {k: scrub(v) if isinstance(v, str) else v for k, v in doc.items()}
