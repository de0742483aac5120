"""``orch doctor``'s local-model rows: the extra, each model file and its sha256, the server
path, and with ``--deep`` one generated token from the managed server."""

from __future__ import annotations

import json
import time
import urllib.request

from orchestrator.config import Config
from orchestrator.errors import OrchError
from orchestrator.operations.doctor import FAIL, OK, WARN, Check

SECTION = "local"


def local_rows(cfg: Config, deep: bool = False) -> list[Check]:
    from orchestrator.local.model import EXTRA_HINT, MODEL_PACKAGE, catalogue, installed
    from orchestrator.local.settings import LocalSettings

    rows = []
    try:
        settings = LocalSettings.from_config(cfg)
    except OrchError as exc:
        return [Check(SECTION, "settings", FAIL, str(exc), "fix the `local` section")]
    from orchestrator.local import build

    extra = installed(MODEL_PACKAGE)
    rows.append(Check(SECTION, "extra", OK if extra else WARN,
                      "the local extra is installed" if extra else "not installed",
                      None if extra else EXTRA_HINT))
    stamp = build.built()  # optional: the prebuilt server needs no build
    rows.append(Check(SECTION, "build", OK,
                      f"llama-server {build.SDIST_VERSION} built: {build.binary()}" if stamp
                      else "no compiled llama-server (optional: the prebuilt server runs "
                           "without one; `orch local build` makes one)"))
    for model in catalogue(settings.models).values():
        name = f"local/{model.alias}"
        if not model.path.is_file():
            if model.builtin:
                can = installed(MODEL_PACKAGE)
                rows.append(Check(SECTION, name, OK if can else WARN,
                                  f"{model.path} is assembled on first use" if can else
                                  "the model file is absent", None if can else EXTRA_HINT))
            else:
                rows.append(Check(SECTION, name, FAIL, f"{model.path} is missing",
                                  f"put it back or `orch local remove {model.alias}`"))
            continue
        rows.append(_digest_row(model, name))
    if settings.server_command:
        path = "local.server_command: " + " ".join(settings.server_command[:3])
    else:
        from orchestrator.local.server_choice import choose

        try:
            path = choose(settings.server).label
        except OrchError as exc:
            return [*rows, Check(SECTION, "server", FAIL, str(exc), "install or build it")]
    from orchestrator.local import manager

    running = manager.status().get("status", "stopped")
    rows.append(Check(SECTION, "server", OK, f"{path}; {running}"))
    if deep:
        rows.append(one_token(settings))
    return rows


def _digest_row(model, name: str) -> Check:
    from orchestrator.local.model import sha256_file

    if not model.sha256:
        return Check(SECTION, name, WARN, f"{model.path}: no sha256 pinned",
                     f"orch local add {model.path} --alias {model.alias} (pins it)")
    actual = sha256_file(model.path)
    if actual != model.sha256:
        return Check(SECTION, name, FAIL, f"{model.path} fails its sha256 check (got "
                     f"{actual[:12]}…, pinned {model.sha256[:12]}…)",
                     "restore the file, or add it again if the new one is intended")
    return Check(SECTION, name, OK, f"{model.path}: sha256 matches")


def one_token(settings) -> Check:
    """Start (or reuse) the managed server and generate one token: the whole local path.
    One server holds one model: the one it serves when it runs, else the default (the other
    local models are checked by their digest rows, never by a restart that would cut off
    someone's wave)."""
    from orchestrator.local import manager
    from orchestrator.local.state import read_state

    running = (read_state() or {}).get("models") or []
    alias = running[0] if running else settings.default_alias
    t0 = time.monotonic()
    try:
        state, _ = manager.ensure(settings, need=[alias])
        body = json.dumps({"model": alias, "max_tokens": 1,
                           "messages": [{"role": "user", "content": "Hi"}]}).encode()
        request = urllib.request.Request(
            f"http://{state['host']}:{state['port']}/v1/chat/completions", data=body,
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=settings.start_timeout_s) as answer:
            doc = json.loads(answer.read())
        if not doc.get("choices"):
            raise OrchError("the server answered without choices")
    except (OrchError, OSError, ValueError, KeyError) as exc:
        return Check(SECTION, "deep", FAIL, f"one token from local/{alias}: {exc}",
                     "orch local status; its log is under ORCH_HOME/local")
    return Check(SECTION, "deep", OK, f"local/{alias} generated a token in "
                 f"{time.monotonic() - t0:.1f} s")
