"""The things orch runs, as typed requests: what a face asks for, in plain values.

Any face builds one: ``orch`` from its flags, ``orch mcp`` from a tool's arguments, a test
from keywords. A request holds text already read (the briefing, not the file it came from)
and names as given; nothing is resolved or checked yet: :func:`orchestrator.app.prepare`
does every check before spend. :func:`fanout` builds a fanout or a retry and refuses the
combinations of values that make no run, the one place both faces meet them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from orchestrator.errors import UsageProblem

DEFAULT_MAX_LEGS = 10
DEFAULT_TIMEOUT_MIN = 10.0
DEFAULT_MAX_STEPS = 20
MAX_TIMEOUT_MIN = 7 * 24 * 60  # a week: past that a leg's time limit means nothing


@dataclass(frozen=True)
class Common:
    """What every run of models takes."""

    # None: not given now: the default, or a retry's or follow-up's wave's own
    # (engine/leg_limits.py); :meth:`limits` says which a fanout or a council runs with
    timeout_min: float | None = None
    max_steps: int | None = None
    workspace: str | None = None  # None: the git work tree the run starts in
    workspace_any: bool = False
    tag: str | None = None
    no_plugins: bool = False
    runs_dir: str | None = None  # None: ORCH_HOME/runs
    budgets: dict[str, Any] = field(default_factory=dict)  # plugins' declared options
    validate_models: bool = True
    quiet: bool = False  # said nothing but errors (the workspace notice included)

    def limits(self) -> tuple[float, int]:
        """Each leg's time limit (minutes) and steps: as given, else the defaults."""
        return (DEFAULT_TIMEOUT_MIN if self.timeout_min is None else self.timeout_min,
                DEFAULT_MAX_STEPS if self.max_steps is None else self.max_steps)


@dataclass(frozen=True)
class Fanout(Common):
    """One briefing on several models at once; with ``chair``, a synthesis after; with
    ``rounds`` ≥ 2, a deliberation (docs/deliberation.md)."""

    kind: ClassVar[str] = "fanout"
    prompt: str = ""
    prompt_source: str = "the prompt"  # where the text came from, for its checks' words
    models: str | None = None  # comma-separated names as given; None: a council or default
    council: str | None = None
    context: tuple[str, ...] = ()  # files added to the briefing, read at prepare
    chair: str | None = None
    synthesis: str | None = None  # the chair's mode (plain, structured); None: plain
    aggregate: str | None = None  # also count the final answers (vote)
    rounds: int = 1
    peers: int | None = None
    tools: str | None = None  # None: read, and not asked for (a base model then has none)
    max_legs: int = DEFAULT_MAX_LEGS


@dataclass(frozen=True)
class Retry(Common):
    """A wave's failed legs again (``--retry-failed``), planned from its whole family."""

    kind: ClassVar[str] = "retry"
    wave_id: str = ""  # the wave, or a unique prefix of its id
    chair: str | None = None
    synthesis: str | None = None  # None: the wave's own
    aggregate: str | None = None  # None: the wave's own
    tools: str | None = None  # None: the wave's own
    max_legs: int = DEFAULT_MAX_LEGS


@dataclass(frozen=True)
class Council(Common):
    """A review by a council: seats, anonymous judging, a tally, a chair's verdict."""

    kind: ClassVar[str] = "council"
    prompt: str = ""
    prompt_source: str = "the prompt"
    diff: str | None = None  # a revision range; `git diff` runs where the request is prepared
    context: tuple[str, ...] = ()
    models: str | None = None
    council: str | None = None
    chair: str | None = None  # None: config's defaults.chair
    tools: str = "read"


@dataclass(frozen=True)
class Bench:
    """A bake-off: contestants on tasks with hidden checks (docs/bench.md)."""

    kind: ClassVar[str] = "bench"
    config_path: str | None = None
    builtin: str | None = None
    cases: str | None = None
    only: str | None = None
    models: tuple[str, ...] | None = None
    trials: int | None = None
    jobs: int | None = None
    timeout_s: float | None = None
    probe: bool = False
    out: str | None = None
    unsafe_checks: bool = False
    maxfail: int | None = None
    junit_xml: str | None = None
    ceilings: dict[str, float | None] = field(default_factory=dict)
    quiet: bool = False


@dataclass(frozen=True)
class BenchResume:
    """The trials an interrupted bench did not run, merged into its results file."""

    kind: ClassVar[str] = "bench_resume"
    file: str = ""
    retry_failed: bool = False
    retry_excluded: bool = False
    unsafe_checks: bool = False
    maxfail: int | None = None
    junit_xml: str | None = None
    ceilings: dict[str, float | None] = field(default_factory=dict)
    quiet: bool = False


@dataclass(frozen=True)
class Continue(Common):
    """A follow-up: a new prompt to each leg of a wave that answered, with that leg's own
    conversation before it (``orch fanout --continue``), run as a new wave whose parent is
    that wave (app/continuation.py)."""

    kind: ClassVar[str] = "continue"
    wave_id: str | None = None  # the wave, a unique prefix of its id; None: the last wave
    prompt: str = ""
    prompt_source: str = "the prompt"
    context: tuple[str, ...] = ()
    chair: str | None = None  # None: the wave's own chair, if it had one
    synthesis: str | None = None  # None: the wave's own
    aggregate: str | None = None  # None: the wave's own
    tools: str | None = None  # None: the wave's own
    max_legs: int = DEFAULT_MAX_LEGS


Request = Fanout | Retry | Continue | Council | Bench | BenchResume


def fanout(*, retry_failed: str | None = None, continue_wave: str | None = None,
           models: str | None = None,
           council: str | None = None, prompt: str | None = None,
           prompt_flags: tuple[str, ...] = (),
           prompt_source: str = "the prompt", context: tuple[str, ...] = (),
           chair: str | None = None, synthesis: str | None = None,
           aggregate: str | None = None, rounds: int = 1, peers: int | None = None,
           tools: str | None = None, max_legs: int = DEFAULT_MAX_LEGS,
           words: tuple[str, ...] = (), **common: Any) -> Fanout | Retry | Continue:
    """A fanout, or the retry of a wave (``retry_failed``), from plain values: the checks
    of values that make no run together, shared by every face (``prompt_flags``: the
    prompt's flags the face was given, ``--prompt``/``--prompt-file``; a retry reads none;
    ``words``: the prompt given as the command's argument, ``orch fanout -m a,b "why"``, the
    same as ``--prompt``, so a face reads no prompt when they are given;
    ``continue_wave``: a follow-up of that wave, :data:`LAST` for the last one)."""
    if retry_failed and continue_wave is not None:
        raise UsageProblem("pass either --retry-failed or --continue, not both")
    if continue_wave is not None and not looks_like_wave_id(continue_wave):
        # `orch fanout --continue "why?"`: the option takes an optional value, so the
        # prompt came as it; the last wave is continued
        if words or prompt_flags:  # the prompt came another way: this was meant as an id
            raise UsageProblem(f"--continue takes a wave id, not {continue_wave!r} (ids begin "
                               "with a date, e.g. 20261208-0031…; `orch runs` lists them); "
                               "pass the prompt once, e.g. orch fanout --continue WAVE_ID "
                               "\"why?\"")
        words, continue_wave = (continue_wave,), LAST
    if words:
        prompt, prompt_source = given_as_argument(words, prompt_flags), "--prompt"
        prompt_flags = (*prompt_flags, "PROMPT")
    if peers is not None and rounds == 1:
        raise UsageProblem("--peers only applies to a deliberation; add --rounds N (N ≥ 2)")
    if retry_failed:
        if rounds > 1:
            raise UsageProblem("--retry-failed re-runs one round of legs; drop --rounds")
        given = [*(flag for flag, value in (("--models", models), ("--council", council))
                   if value), *prompt_flags, *(["--context"] if context else [])]
        if given:
            raise UsageProblem(f"--retry-failed re-runs that wave's own models and briefing; "
                               f"drop {', '.join(given)}")
        return Retry(wave_id=retry_failed, chair=chair, synthesis=synthesis,
                     aggregate=aggregate, tools=tools, max_legs=max_legs, **common)
    if continue_wave is not None:
        given = [*(flag for flag, value in (("--models", models), ("--council", council),
                                            ("--rounds", rounds > 1)) if value)]
        if given:
            raise UsageProblem(f"--continue asks that wave's own legs again; drop "
                               f"{', '.join(given)}")
        return Continue(wave_id=None if continue_wave == LAST else continue_wave,
                        prompt=prompt or "", prompt_source=prompt_source,
                        context=tuple(context), chair=chair, synthesis=synthesis,
                        aggregate=aggregate, tools=tools, max_legs=max_legs, **common)
    return Fanout(prompt=prompt or "", prompt_source=prompt_source, models=models,
                  council=council, context=tuple(context), chair=chair, synthesis=synthesis,
                  aggregate=aggregate, rounds=rounds,
                  peers=peers, tools=tools, max_legs=max_legs, **common)


LAST = "last"  # `--continue` with no wave id: the last wave recorded
_RUN_ID = re.compile(r"[A-Za-z0-9._-]*[0-9]{4}[A-Za-z0-9._-]*")  # ids begin with a date


def looks_like_wave_id(text: str) -> bool:
    """A wave id, a prefix of one (four digits at least), a run id, or ``last``: not a
    prompt given after ``--continue``."""
    return text == LAST or _RUN_ID.fullmatch(text.strip()) is not None


def given_as_argument(words: tuple[str, ...], prompt_flags: tuple[str, ...]) -> str:
    """The prompt given as the command's one argument; given twice (with ``--prompt`` or
    ``--prompt-file`` too) or as several unquoted words, a usage mistake (exit 2)."""
    from orchestrator.briefing import positional_prompt, read_prompt

    flag = prompt_flags[0] if prompt_flags else None
    text = positional_prompt(words, "" if flag == "--prompt" else None,
                             "" if flag and flag != "--prompt" else None)
    return read_prompt(text, None)  # an empty one is said as --prompt's is
