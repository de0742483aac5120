"""``orch local``: the embedded local model — ``start|stop|status`` of the one local model
server every orch process shares, ``build`` of the llama-server binary it may run, and
``add|list|remove`` of the GGUF files it serves.

One noun per concept: ``orch local`` is the local model (its server included), ``orch serve``
is orch's own warm daemon. ``orch server`` (this group's old name, a letter from ``serve``)
still works and says the new spelling."""

from __future__ import annotations

import time
from pathlib import Path

import click

from orchestrator.cli.common import print_json
from orchestrator.errors import UsageProblem


def _settings():
    from orchestrator import runtime
    from orchestrator.local.settings import LocalSettings

    return LocalSettings.from_config(runtime.config())


@click.group()
def local() -> None:
    """The embedded local model: its server, binary and GGUF models, each as local/ALIAS (the
    built-in is local/gemma3-270m). The server starts on first use of a local/... model, is
    shared by every orch process of this user, and stops after `local.idle_minutes`
    (default 15) unused.

    \b
    Examples:
      orch local start           # start the server now (e.g. before timing a wave)
      orch local status --json
      orch local stop
      orch local add ~/models/qwen2.5-0.5b-q4.gguf --alias qwen0.5b
      orch fanout -m local/gemma3-270m,local/qwen0.5b "..."
      orch local list
      orch local build           # optional: compile a native llama-server (10-45 min)
    """


@click.group()
def server() -> None:
    """Renamed `orch local start|stop|status` (one noun per concept: `orch serve` is orch's
    daemon). This spelling still works and says the new one."""
    from orchestrator.notices import say

    say("`orch server` is now `orch local` (orch local start|stop|status); "
        "the old spelling still works")


@local.command()
@click.option("--json", "as_json", is_flag=True, help="Print the server's state as JSON.")
def start(as_json):
    """Start the local model server (or find it running), with every configured model."""
    from orchestrator.local.manager import ensure

    t0 = time.monotonic()
    state, started = ensure(_settings(), retry_failed=True)
    elapsed = time.monotonic() - t0
    if as_json:
        print_json({**state, "started": started, "start_s": round(elapsed, 3)})
        return
    from orchestrator.notices import say

    for text in state.get("notices") or []:
        say(text)
    verb = f"started in {elapsed:.1f} s" if started else "already running"
    click.echo(f"local server {verb}: {state['url']} · pid {state['server_pid']} · "
               f"models: {', '.join(state['models'])} · {state.get('slots')} "
               f"slot{'' if state.get('slots') == 1 else 's'} · "
               f"{state.get('path')} path")


@local.command()
@click.option("--json", "as_json", is_flag=True, help="Print what was stopped as JSON.")
def stop(as_json):
    """Stop the local model server and its supervisor (legs in flight end with a connection error)."""
    from orchestrator.local.manager import stop as stop_server

    state = stop_server()
    if as_json:
        print_json({"stopped": state is not None, "pid": (state or {}).get("server_pid"),
                    "port": (state or {}).get("port")})
        return
    if state is None:
        click.echo("no local server is running")
    else:
        click.echo(f"stopped the local server (pid {state.get('server_pid')}, port "
                   f"{state.get('port')})")


@local.command()
@click.option("--json", "as_json", is_flag=True, help="Print the state and health as JSON.")
def status(as_json):
    """Is the local model server running, on which port, serving what, restarted how often."""
    from orchestrator.local.manager import status as server_status

    doc = server_status()
    if as_json:
        print_json(doc)
        return
    if doc["status"] == "stopped" and "pid" not in doc:
        click.echo("local server: stopped (the next local/... model use starts it)")
        return
    click.echo(f"local server: {doc['status']}" + (f" ({doc['note']})" if doc.get("note") else ""))
    if doc.get("error"):
        click.echo(f"  error: {doc['error']}")
    click.echo(f"  url: {doc.get('url')}  pid: {doc.get('server_pid')}  "
               f"supervisor: {doc.get('pid')}")
    click.echo(f"  models: {', '.join(doc.get('served') or doc.get('models') or [])}  "
               f"slots: {doc.get('slots')} × {doc.get('n_ctx_per_slot')} tokens of context")
    if doc.get("threads"):
        click.echo(f"  threads: {doc['threads']} (steps of several slots: "
                   f"{doc.get('threads_batch') or doc['threads']}; {doc.get('threads_reason')})")
    click.echo(f"  server: {doc.get('server')}  path: {doc.get('path')}"
               + (f" ({doc['path_reason']})" if doc.get("path_reason") else ""))
    idle = doc.get("idle_s") or 0
    click.echo(f"  started: {doc.get('started_at')}  restarts: {doc.get('restarts', 0)}  "
               f"idle stop: {f'{idle / 60:g} min' if idle else 'off'}  "
               f"last used: {doc.get('last_used_s_ago')} s ago")
    click.echo(f"  log: {doc.get('log')}")


@local.command()
@click.option("--force", is_flag=True, help="Build again even if a build is cached.")
@click.option("--jobs", "-j", type=click.IntRange(1, 256), help="Compile jobs (default: cores).")
@click.option("--json", "as_json", is_flag=True, help="Print the build's stamp as JSON.")
def build(force, jobs, as_json):
    """Optional: compile llama.cpp's llama-server once (portable: GGML_NATIVE=OFF) from the
    pinned llama-cpp-python sdist and cache it in the data directory. The prebuilt server of
    the local extra needs no build; a compiled one runs with `local.server: "built"` and is
    the portable path's server. 10-45 minutes on 2 cores depending on load; later runs find
    it cached at once; one build at a time."""
    from orchestrator.local.build import build as build_server

    def say(text: str) -> None:
        click.echo(text, err=True)

    stamp = build_server(force=force, jobs=jobs, say=say)
    if as_json:
        print_json(stamp)
        return
    how = ("already built" if stamp["cached"]
           else f"built in {stamp['seconds'] / 60:.1f} min")
    click.echo(f"llama-server {stamp['version']} {how}: {stamp['binary']}")


@local.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--alias", required=True, help="The model's name: it is used as local/ALIAS.")
@click.option("--chat-format", metavar="NAME",
              help="llama.cpp chat format (default: the GGUF's own template); 'orch-plain' "
                   "hands a base model the conversation as plain text to continue.")
def add(path, alias, chat_format):
    """Serve the GGUF file PATH as local/ALIAS; its sha256 is pinned now and checked at
    every server start."""
    from orchestrator import runtime
    from orchestrator.local import model as lm
    from orchestrator.local.state import read_state

    lm.check_alias(alias)
    path = path.expanduser().resolve()
    if not path.is_file():
        raise UsageProblem(f"{path} does not exist; pass the path of a .gguf file")
    if not lm.is_gguf(path):
        raise UsageProblem(f"{path} is not a GGUF file (it does not start with 'GGUF'); "
                        "llama.cpp serves GGUF models only")
    digest = lm.sha256_file(path)
    cfg = runtime.config()
    section = cfg.data.setdefault("local", {})
    entry = {"path": str(path), "sha256": digest}
    if chat_format:
        entry["chat_format"] = chat_format
    section.setdefault("models", {})[alias] = entry
    cfg.save()
    runtime.config.cache_clear()
    replaced = " (replacing the built-in)" if alias == lm.BUILTIN_ALIAS else ""
    click.echo(f"added local/{alias}{replaced}: {path} · sha256 {digest[:12]}…")
    state = read_state()
    if state is not None and alias not in state.get("models", []):
        served = ", ".join(f"local/{m}" for m in state.get("models") or []) or "another model"
        click.echo(f"the running local server serves {served} (one model per server): "
                   f"`orch local stop` when its waves are done, and the next wave on "
                   f"local/{alias} starts it with local/{alias}")


@local.command(name="remove")
@click.argument("alias")
def remove(alias):
    """Stop serving local/ALIAS (the file itself is left alone)."""
    from orchestrator import runtime

    cfg = runtime.config()
    models = (cfg.data.get("local") or {}).get("models") or {}
    if alias not in models:
        known = ", ".join(sorted(models)) or "none added"
        raise UsageProblem(f"no added local model {alias!r} (added: {known})")
    del models[alias]
    cfg.save()
    runtime.config.cache_clear()
    click.echo(f"removed local/{alias}")


@local.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print the models as JSON.")
def list_models(as_json):
    """Every local model: alias, file, whether it is on disk, whether the server serves it."""
    from orchestrator.local.model import catalogue
    from orchestrator.local.state import read_state

    state = read_state() or {}
    served = set(state.get("models") or []) if state.get("status") == "running" else set()
    rows = []
    for model in catalogue(_settings().models).values():
        on_disk = model.path.is_file()
        rows.append({**model.to_dict(), "on_disk": on_disk,
                     "size_mb": round(model.path.stat().st_size / 1e6, 1) if on_disk else None,
                     "served": model.alias in served})
    if as_json:
        print_json(rows)
        return
    for row in rows:
        where = f"{row['size_mb']} MB" if row["on_disk"] else (
            "assembled on first use" if row["builtin"] else "MISSING")
        tags = [t for t, on in (("built-in", row["builtin"]), ("served", row["served"])) if on]
        click.echo(f"{row['model']:<28} {where:<24} {', '.join(tags):<18} {row['path']}")


for _command in (start, stop, status):  # the old spelling runs the same commands
    server.add_command(_command)
