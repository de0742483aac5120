"""The ask page of ``orch ui``: a form that starts a fanout (with a chair, rounds, a vote), a
council or a bench, the live page that shows every leg as it runs, and the follow-up box.

Nothing here checks a run or runs one: a form becomes a typed request
(orchestrator/app/requests.py) and goes through :func:`orchestrator.app.prepare` (models,
keys, budgets, ceilings, the briefing's intake, the workspace: the CLI's own checks), then
:func:`orchestrator.app.start.start` (in :mod:`orchestrator.ui.live`); a follow-up is
:func:`orchestrator.app.continuation.follow_up`. The one thing this page adds is the
confinement of context files to the workspace the page was opened on (a browser names files
by text). The server's guard (Host, cookie, Origin, the form token) has passed before any
function here sees a form. Model text reaches the browser as JSON and is written with
``textContent`` by ``static/ask.js``: never markup.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from orchestrator.errors import OrchError, UsageProblem
from orchestrator.ui.render import money, page
from orchestrator.ui.server import FormTokens, Reply

KINDS = ("fanout", "council", "bench")
SUITES = ("reading", "format", "adversarial", "review")
LEG_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")  # a folder name, never a path
LISTED_FILES = 2000  # context files the picker offers; any file inside may be typed
COMMANDS = {"fanout": "fanout", "council": "council_run", "bench": "bench"}  # a kind's options
BUDGET = "budget."  # a plugin's declared option in the form: budget.<key> (budget.max_cost)
FIELDS = frozenset({"kind", "model", "other_models", "prompt", "context", "context_other",
                    "chair", "rounds", "aggregate", "suite", "trials"})
FOLLOW_FIELDS = frozenset({"prompt"})  # and budget.<key>: the follow-up box's fields


def configured_models(cfg) -> list[str]:
    """The models config.json names (defaults, aliases, councils, the default chair), in
    that order, once each: what the picker offers."""
    names: list[str] = [*(cfg.defaults.get("models") or []), *cfg.aliases]
    for members in cfg.councils.values():
        names += list(members)
    if cfg.defaults.get("chair"):
        names.append(cfg.defaults["chair"])
    return list(dict.fromkeys(str(n) for n in names if n))


def workspace_files(root: Path | None) -> list[str]:
    """The files a context may name, relative to the workspace (a git work tree): git's
    tracked files, at most :data:`LISTED_FILES` (any other file inside may be typed)."""
    if root is None:
        return []
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True,
                             timeout=10, check=True).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError):
        return []
    return sorted(p for p in out.split("\0") if p)[:LISTED_FILES]


def confined(root: Path | None, names: list[str]) -> tuple[str, ...]:
    """Each named context file as an absolute path inside the workspace, or a one-line
    problem: outside it (``..``, an absolute path, a symlink out) nothing is read."""
    if not names:
        return ()
    if root is None:
        raise UsageProblem("no workspace: start `orch ui` inside a git work tree to add "
                           "context files")
    base = root.resolve()
    out = []
    for name in names:
        path = (base / name).resolve()
        if not path.is_relative_to(base):
            raise UsageProblem(f"context {name} is outside the workspace {base}; pick a file "
                               "inside it")
        out.append(str(path))
    return tuple(out)


def _one(form: dict[str, list[str]], key: str, default: str = "") -> str:
    return (form.get(key) or [default])[-1].strip()


def _whole(form: dict[str, list[str]], key: str, default: int, low: int, high: int) -> int:
    text = _one(form, key, str(default)) or str(default)
    try:
        value = int(text)
    except ValueError:
        raise UsageProblem(f"{key} must be a whole number, not {text!r}") from None
    if not low <= value <= high:
        raise UsageProblem(f"{key} must be from {low} to {high}, not {value}")
    return value


def budget_fields(pm) -> list[dict]:
    """A field per option the plugins that are on declare for a run the form can start (a
    budget: a dollar ceiling, a token budget...), with its help and the kinds that take
    it: what the form renders."""
    from orchestrator.option_values import declared_on

    fields: dict[str, dict] = {}
    for kind, command in COMMANDS.items():
        for plugin, option in declared_on(pm, command):
            field = fields.setdefault(option.key, {
                "name": BUDGET + option.key, "flag": option.flag, "type": option.type,
                "help": option.described, "choices": option.choices, "plugin": plugin,
                "metavar": option.metavar or "", "kinds": []})
            field["kinds"].append(kind)
    return list(fields.values())


def budgets_of(form: dict[str, list[str]], kind: str, pm) -> dict:
    """The budgets a form sets for a ``kind`` of run, each checked as the CLI's flag and the
    MCP argument are (:func:`orchestrator.option_values.given`: a number, finite, within
    its bounds; a field for a plugin that is off or that no plugin declares is refused)."""
    from orchestrator.option_values import declared_on, given

    wanted = {name[len(BUDGET):]: form[name][-1] for name in form  # as typed: the check
              if name.startswith(BUDGET) and _one(form, name)}  # says what it refuses
    if not wanted:
        return {}
    command = COMMANDS[kind]
    return given(wanted, declared_on(pm, command), pm=pm, command=command)


def request_of(form: dict[str, list[str]], root: Path | None, runs_dir: Path, pm=None):
    """The typed request a form asks for (orchestrator/app/requests.py); a value that makes
    no request is a one-line ``UsageProblem``, as the CLI's flag would be. ``pm``: the
    plugins that are on (default: the run's)."""
    from orchestrator.app.requests import Bench, Council, fanout

    unknown = sorted(n for n in form if n not in FIELDS and not n.startswith(BUDGET))
    if unknown:
        raise UsageProblem(f"the form has no field {unknown[0][:60]!r}; reload the ask page")
    kind = _one(form, "kind", "fanout")
    if kind not in KINDS:
        raise UsageProblem(f"kind is one of {', '.join(KINDS)}, not {kind!r}")
    if pm is None and any(n.startswith(BUDGET) and _one(form, n) for n in form):
        from orchestrator import runtime

        pm = runtime.plugin_manager()
    budgets = budgets_of(form, kind, pm)
    picked = [m.strip() for m in form.get("model", []) if m.strip()]
    picked += [m.strip() for m in _one(form, "other_models").split(",") if m.strip()]
    models = ",".join(dict.fromkeys(picked)) or None
    prompt = (form.get("prompt") or [""])[-1]
    context = confined(root, [c for c in form.get("context", []) if c.strip()]
                       + [c.strip() for c in _one(form, "context_other").split(",")
                          if c.strip()])
    chair = _one(form, "chair") or None
    common = {"workspace": str(root) if root else None, "runs_dir": str(runs_dir),
              "quiet": True, "budgets": budgets}
    if kind == "bench":
        suite = _one(form, "suite", SUITES[0])
        if suite not in SUITES:
            raise UsageProblem(f"suite is one of {', '.join(SUITES)}, not {suite!r}")
        return Bench(builtin=suite, models=tuple(dict.fromkeys(picked)) or None,
                     trials=_whole(form, "trials", 1, 1, 20), quiet=True, ceilings=budgets)
    if not prompt.strip():
        raise UsageProblem("the prompt is empty; type a question")
    if kind == "council":
        return Council(prompt=prompt, models=models, chair=chair, context=context, **common)
    aggregate = _one(form, "aggregate") or None
    return fanout(models=models, prompt=prompt, context=context, chair=chair,
                  aggregate=aggregate, rounds=_whole(form, "rounds", 1, 1, 10), **common)


def follow_budgets_of(form: dict[str, list[str]], pm=None) -> dict:
    """The budgets a follow-up box sets (a fanout's, checked as the ask form's are: an
    unknown field is refused); none set: the wave's own are kept
    (:func:`orchestrator.app.continuation.prepare_continue`)."""
    unknown = sorted(n for n in form if n not in FOLLOW_FIELDS and not n.startswith(BUDGET))
    if unknown:
        raise UsageProblem(f"the form has no field {unknown[0][:60]!r}; reload the page")
    if pm is None and any(n.startswith(BUDGET) and _one(form, n) for n in form):
        from orchestrator import runtime

        pm = runtime.plugin_manager()
    return budgets_of(form, "fanout", pm)


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:200]


class Ask:
    """The ask routes, held by :class:`orchestrator.ui.views.View`."""

    def __init__(self, runs_dir: Path, forms: FormTokens, workspace: Path | None) -> None:
        from orchestrator.ui.live import LiveRuns

        self.runs_dir = runs_dir
        self.forms = forms
        self.workspace = workspace
        self.live = LiveRuns()

    # --- pages ---------------------------------------------------------------------------

    def form(self, values: dict[str, list[str]] | None = None, error: str | None = None,
             status: int = 200) -> Reply:
        from orchestrator import runtime

        try:
            models = configured_models(runtime.config())
            budgets = budget_fields(runtime.plugin_manager())
        except OrchError as exc:
            models, budgets, error = [], [], error or str(exc)
        values = values or {}
        return Reply(page("ask.html", title="Ask", models=models, suites=SUITES, kinds=KINDS,
                          budgets=budgets,
                          files=workspace_files(self.workspace), workspace=self.workspace,
                          error=error, v={k: v[-1] for k, v in values.items() if v},
                          picked=set(values.get("model", [])),
                          context=set(values.get("context", [])),
                          form_token=self.forms.issue("/ask")), status)

    def follow_box(self, wave_id: str, *, hidden: bool = False) -> dict:
        """What a page renders the follow-up box of ``wave_id`` with: its action (the one
        follow-up route), a form token for it, the fanout's budget fields."""
        from orchestrator import runtime

        action = f"/ask/{wave_id}/follow-up"
        try:
            fields = [b for b in budget_fields(runtime.plugin_manager())
                      if "fanout" in b["kinds"]]
        except OrchError:
            fields = []  # the POST says what is wrong
        return {"follow": action, "form_token": self.forms.issue(action),
                "follow_budgets": fields, "follow_hidden": hidden}

    def running(self, run_id: str) -> Reply | None:
        live = self.live.get(run_id)
        if live is None:
            return None
        box = self.follow_box(run_id, hidden=True) if live.kind == "wave" else {}
        return Reply(page("asking.html", title=f"Asking: {live.question}", live=live, **box))

    def events(self, run_id: str, after: str) -> Reply | None:
        """What the live page polls: the events after the ``after``-th, whether the run is
        over, and each ended leg's answer as it is on disk (for a face without streamed
        text, and the final word when there was)."""
        live = self.live.get(run_id)
        if live is None:
            return None
        try:
            start = max(0, int(after or 0))
        except ValueError:
            start = 0
        events, done = live.since(start)
        answers = {}
        for event in events:
            if event.get("type") == "leg_ended":
                leg = event.get("leg") or {}
                event["cost"] = money(leg.get("cost_usd"))
                answers[str(leg.get("leg_id"))] = self._answer(str(leg.get("leg_id")))
            elif event.get("type") in ("leg_started", "leg_progress"):
                event["cost"] = money((event.get("leg") or {}).get("cost_usd"))
        body = {"events": events, "next": start + len(events), "done": done,
                "answers": answers, "kind": live.kind}
        return Reply(json.dumps(body), 200, "application/json")

    def _answer(self, leg_id: str) -> str:
        if not LEG_ID.match(leg_id):
            return ""
        try:
            doc = json.loads((self.runs_dir / leg_id / "metadata.json").read_text())
        except (OSError, ValueError):
            return ""
        return str(doc.get("answer") or "") if isinstance(doc, dict) else ""

    # --- forms ---------------------------------------------------------------------------

    def ask(self, form: dict[str, list[str]]) -> Reply:
        """Start what the form asks for, through the CLI's own prepare and start."""
        from orchestrator.app.prepare import prepare

        try:
            request = request_of(form, self.workspace, self.runs_dir)
            prepared = prepare(request)
            try:
                live = self.live.start(prepared, question=first_line(
                    getattr(request, "prompt", "") or f"bench {getattr(request, 'builtin', '')}"))
            except BaseException:
                prepared.close()
                raise
        except OrchError as exc:
            return self.form(form, error=str(exc), status=400)
        return _see(f"/ask/{live.run_id}")

    def follow_up(self, parent: str, form: dict[str, list[str]]) -> Reply:
        """A second prompt to the same legs, with their conversation: a new wave."""
        from orchestrator.app.continuation import follow_up
        from orchestrator.app.prepare import prepare

        prompt = (form.get("prompt") or [""])[-1]
        try:
            budgets = follow_budgets_of(form)
            if not prompt.strip():
                raise UsageProblem("the follow-up is empty; type a question")
            prepared = prepare(follow_up(
                parent, prompt, runs_dir=str(self.runs_dir), budgets=budgets,
                workspace=str(self.workspace) if self.workspace else None, quiet=True))
            try:
                live = self.live.start(prepared, question=first_line(prompt), parent=parent)
            except BaseException:
                prepared.close()
                raise
        except OrchError as exc:
            return Reply(page("asked_error.html", title="Follow-up refused", error=str(exc),
                              back=f"/ask/{parent}"), 400)
        return _see(f"/ask/{live.run_id}")


def _see(location: str) -> Reply:
    return Reply("", 303, "text/plain; charset=utf-8", location=location)
