"""A follow-up (``orch fanout --continue [WAVE]``): a new prompt to each leg of a wave that
answered, with that leg's own conversation before it, as a new wave whose parent is that wave.

A leg's conversation is read from the wave's record on disk, so it survives a restart: the
turns it was continued with (orchestrator/engine/histories.py, written by the engine for a
continued wave and its retries), then the wave's briefing (``briefing.md``) and the leg's
answer (its own ``metadata.json``). Only the user and assistant texts go back, never tool
turns. Whatever is read passes the same intake as every other byte: a registered key value
refuses the run before any spend (:func:`orchestrator.briefing.check_briefing`), and every
message is admitted again on the wire (orchestrator/intake: credential content withheld), so
a hand-edited record can change what is asked but not what may leave.

:func:`follow_up` is the one function a face calls (``orch fanout``, `orch mcp`'s fanout
tool, ``orch ui``'s follow-up): it builds the :class:`~orchestrator.app.requests.Continue`
request that :func:`orchestrator.app.prepare.prepare` prepares (:func:`prepare_continue`):
the same checks, budgets, ceilings and key declarations as a fanout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.app.requests import Continue
from orchestrator.engine import histories, leg_limits
from orchestrator.errors import OrchError, UsageProblem


@dataclass
class Thread:
    """What a wave's answered legs said: each one's model and conversation."""

    wave_id: str
    doc: dict[str, Any]
    models: list[str] = field(default_factory=list)
    conversations: list[list[dict[str, str]]] = field(default_factory=list)
    legs: list[str] = field(default_factory=list)  # the parent leg each one continues
    skipped: list[str] = field(default_factory=list)  # "model (leg id): status"


def follow_up(wave_id: str | None, prompt: str, **options: Any) -> Continue:
    """The request that continues ``wave_id`` (None: the last wave) with ``prompt``;
    ``options``: any other field of :class:`Continue` (context, chair, budgets, runs_dir, ...).
    Prepare it with :func:`orchestrator.app.prepare.prepare`, start it with
    :func:`orchestrator.app.start.start`."""
    return Continue(wave_id=wave_id, prompt=prompt, **options)


def refusal(runs: Path, wave_id: str) -> str | None:
    """Why ``wave_id`` cannot be followed up now (a deliberation, a council's stage, a wave
    still running, none of its legs answered: :func:`read_thread`'s own refusals, the ones
    :func:`follow_up` meets when prepared), or None: what a page asks before it offers a
    follow-up box. Reads the record only: no plugin, no key, nothing sent."""
    try:
        read_thread(runs, wave_id)
    except OrchError as exc:
        return str(exc)
    return None


def last_wave(runs: Path) -> str:
    """The newest wave under ``runs``: ids sort by the second they were made, and those of
    the newest second by the moment their ``wave.json`` says."""
    from orchestrator.engine.rebuild import wave_ids
    from orchestrator.store import read_json

    ids = sorted(wave_ids(runs)) if runs.is_dir() else []
    if not ids:
        raise UsageProblem(f"no wave under {runs} to continue; run `orch fanout` first, or "
                           "pass --runs-dir")
    second = ids[-1].rsplit("-", 1)[0]

    def made(wave_id: str) -> str:
        try:
            return str(read_json(runs / wave_id / "wave.json").get("created_at") or "")
        except (OSError, ValueError, AttributeError):
            return ""

    return max((w for w in ids if w.startswith(second)), key=lambda w: (made(w), w))


def _wave_id(runs: Path, given: str | None) -> str:
    from orchestrator.engine.rebuild import resolve_wave_id

    if given is None:
        return last_wave(runs)
    for folder in (runs / given.strip(), runs / f"council-{given.strip()}"):  # as printed
        if given.strip() and "/" not in given and folder.is_dir() \
                and not (folder / "wave.json").exists() and (folder / "run.json").exists():
            raise UsageProblem(f"{given} is a council run, not a wave; --continue follows "
                               "up a fanout: pass a wave id from `orch runs`")
    return resolve_wave_id(runs, given)


def _answer(runs: Path, wave_id: str, leg: dict[str, Any]) -> str:
    """The leg's answer from its own record (``metadata.json``), else the wave's copy."""
    from orchestrator.store import read_json

    leg_id = str(leg.get("leg_id") or "")
    try:
        meta = read_json(runs / leg_id / "metadata.json")
    except (OSError, ValueError):
        meta = None
    if isinstance(meta, dict) and meta.get("wave_id") == wave_id \
            and meta.get("leg_id") == leg_id and isinstance(meta.get("answer"), str):
        return meta["answer"]
    return leg.get("answer") if isinstance(leg.get("answer"), str) else ""


def read_thread(runs: Path, given: str | None) -> Thread:
    """Each answered leg of the wave ``given`` (an id, a unique prefix, None: the last)
    with its conversation: the turns before, the briefing, its answer."""
    from orchestrator.engine.rebuild import load_wave

    wave_id = _wave_id(runs, given)
    doc = load_wave(runs, wave_id)
    if doc.get("kind") == "deliberation":
        raise UsageProblem(f"wave {wave_id} is a deliberation (--rounds); --continue follows "
                           "up a one-round fanout: start a new deliberation with its answer "
                           "in --context")
    if doc.get("run_id"):
        raise UsageProblem(f"wave {wave_id} is a stage of run {doc['run_id']}, not a fanout; "
                           "pass a wave id from `orch runs`")
    if doc.get("status") == "running":
        raise OrchError(f"wave {wave_id} is still running (pid {doc.get('pid')}); wait for it "
                        "to end before continuing it")
    try:
        briefing = (runs / wave_id / "briefing.md").read_text(encoding="utf-8")
    except OSError as exc:
        raise OrchError(f"cannot read the briefing of wave {wave_id} "
                        f"({exc.strerror or exc}); start a new fanout") from None
    before = histories.read(runs / wave_id)
    thread = Thread(wave_id=wave_id, doc=doc)
    for leg in doc.get("legs") or []:
        if not isinstance(leg, dict) or not re.fullmatch(
                re.escape(wave_id) + r"-\d+", str(leg.get("leg_id") or "")):
            continue  # not a leg of this wave (WAVE-N, a folder, never a path like
            # WAVE-1/../..): never someone else's conversation, never a file elsewhere
        answer = _answer(runs, wave_id, leg) if leg.get("status") == "complete" else ""
        if not answer.strip():
            thread.skipped.append(f"{leg.get('model')} ({leg['leg_id']}): "
                                  f"{leg.get('status')}")
            continue
        thread.models.append(str(leg.get("model")))
        thread.legs.append(leg["leg_id"])
        thread.conversations.append([*before.get(leg["leg_id"], []),
                                     {"role": "user", "content": briefing},
                                     {"role": "assistant", "content": answer}])
    if not thread.models:
        said = "; ".join(thread.skipped) or "it has no legs"
        raise OrchError(f"wave {wave_id} has no answered leg to continue ({said}); retry it "
                        f"first: orch fanout --retry-failed {wave_id}")
    return thread


def prepare_continue(request: Continue):
    """A follow-up of a wave, prepared as a fanout is (app/wave.py ``prepare_wave``): its
    answered legs' models, its chair, tools, workspace, tag and budgets unless the request
    gives its own, and its legs' time limit and steps (engine/leg_limits.py); each leg's
    conversation checked as a briefing is."""
    from orchestrator import runtime
    from orchestrator.app.prepared import Prepared
    from orchestrator.app.wave import as_prepared, prepare_wave, runs_dir_of
    from orchestrator.briefing import check_briefing, compose, read_context
    from orchestrator.budget_guards import declarations
    from orchestrator.models.addressing import check_key
    from orchestrator.models.resolve import resolve_all

    cfg = runtime.config()
    pm = runtime.plugin_manager(enabled=not request.no_plugins)
    runs = runs_dir_of(request)
    thread = read_thread(runs, request.wave_id)
    wave_id, doc = thread.wave_id, thread.doc
    for leg_id, turns in zip(thread.legs, thread.conversations, strict=True):
        for turn in turns:  # the earlier turns go back to the model: checked as a briefing
            check_briefing(turn["content"], f"the conversation of leg {leg_id}")
    old = doc.get("options") if isinstance(doc.get("options"), dict) else {}
    budgets = dict(request.budgets)
    names = {o.key for _, o in declarations(pm, cfg, no_plugins=request.no_plugins)}
    kept = {k: v for k, v in old.items() if k in names and k not in budgets}
    for key in kept:  # a retry ran on what its family had left: the ceiling set is the one
        family = old.get(f"{key}_family")  # a follow-up (a new run) keeps, as of its root
        if isinstance(family, dict) and family.get("ceiling") is not None:
            kept[key] = family["ceiling"]
    kept = _checked_kept(kept, pm, cfg, request.no_plugins, wave_id)
    notices: list[str] = []
    if thread.skipped:
        notices.append(f"continuing {len(thread.models)} of "
                       f"{len(thread.models) + len(thread.skipped)} legs of wave {wave_id}; "
                       f"not answered: {'; '.join(thread.skipped)}")
    if doc.get("retry_of"):  # a retry holds only the legs it retried
        notices.append(f"wave {wave_id} is a retry of wave {doc['retry_of']}: only its own "
                       f"legs are continued; continue wave {doc['retry_of']} for the others")
    chair = request.chair or doc.get("chair_model")
    if not (chair is None or isinstance(chair, str)):
        raise UsageProblem(f"wave {wave_id}'s wave.json names no readable chair "
                           f"({str(chair)[:40]!r}); pass --chair MODEL, or fix wave.json")
    timeout_min, max_steps = leg_limits.kept(  # the wave's legs' limits, as its budgets
        doc, wave_id, timeout_min=request.timeout_min, max_steps=request.max_steps)

    for name in [*dict.fromkeys(thread.models), *([chair] if chair else [])]:
        try:
            check_key(resolve_all([name], cfg, pm)[0])
        except OrchError as exc:  # no longer configured: said as the wave's
            said = OrchError(f"wave {wave_id} asked {name}, which cannot run now: {exc}")
            said.exit_code = exc.exit_code
            raise said from None
    spec, pm = prepare_wave(
        thread.models, compose(request.prompt, read_context(request.context)),
        request.prompt_source, cfg=cfg, runs=runs, chair=chair,
        timeout_min=timeout_min, max_steps=max_steps,
        tools_mode=request.tools or old.get("tools"),
        workspace=request.workspace or old.get("workspace"),
        workspace_any=request.workspace_any, max_legs=request.max_legs,
        tag=request.tag or doc.get("tag"), no_plugins=request.no_plugins,
        budgets={**kept, **budgets}, kept_from=dict.fromkeys(kept, wave_id), pm=pm,
        validate_models=request.validate_models, quiet=request.quiet,
        tools_asked=request.tools is not None or old.get("tools_asked", True),
        notices=notices, aggregate=request.aggregate or old.get("aggregate"),
        synthesis=request.synthesis or old.get("synthesis"))
    spec.histories = thread.conversations
    spec.parent_wave_id = wave_id
    return as_prepared(Prepared, request, "wave", spec, spec, pm, cfg, notices)



def _checked_kept(kept: dict[str, Any], pm, cfg, no_plugins: bool, wave_id: str) -> dict:
    """The budgets a follow-up keeps from its wave's record, through the one check of an
    option's value (orchestrator/option_values.py) as a typed flag is: a hand-edited
    ``wave.json`` (``"max_cost": "abc"``) is one line naming the wave and the fix, not an
    internal error where the run's ceiling is read."""
    from orchestrator.budget_guards import declarations
    from orchestrator.option_values import BadValue, given

    try:
        return given(kept, list(declarations(pm, cfg, no_plugins=no_plugins)), pm=pm,
                     source=lambda key: f"--{key.replace('_', '-')} kept from wave {wave_id}")
    except BadValue as exc:
        raise UsageProblem(f"{exc}; give the follow-up its own value, or fix that "
                           "wave's wave.json") from None
