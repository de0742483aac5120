"""Order said, not guessed: a plugin's ``AFTER`` / ``BEFORE`` place its hooks relative to
other plugins (built-ins included), on top of pluggy's order.

pluggy's order (``tryfirst``, then plain ones last-registered first, then ``trylast``) puts a
third party before every built-in, since built-ins are ``trylast``. A plugin that must see what
a built-in did (a ceiling that reads ``max_tokens`` after ``output_budget`` set it) says so::

    AFTER = ["output_budget"]                        # in every hook both implement
    AFTER = {"before_request": ["output_budget"]}    # in this hook only
    BEFORE = ["tiers"]

The constants are read once, through the runner, with the plugin's other declarations
(snapshot.py). ``arrange`` keeps pluggy's order except where a constraint moves a plugin:
a stable topological order, plain implementations among plain ones and wrappers among
wrappers. A constraint naming a plugin that does not implement the hook binds nothing there;
constraints that contradict each other (a cycle) leave those plugins in pluggy's order, and
``problems`` says so (``orch plugins`` prints it under the order).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Constraint = tuple[tuple[str, tuple[str, ...]], ...]
EVERY = "*"


def constraint(what: str, raw: Any, warnings: list[str]) -> Constraint:
    """``AFTER`` / ``BEFORE`` as declared, checked: plugin names, or {hook: names}. Anything
    else is ignored with a warning (an order that cannot be read is not guessed)."""
    if raw is None or raw == () or raw == []:
        return ()
    if isinstance(raw, str):
        raw = [raw]
    if isinstance(raw, list | tuple | set | frozenset) and all(isinstance(n, str) for n in raw):
        return ((EVERY, tuple(sorted(raw))),)
    if isinstance(raw, dict) and all(
            isinstance(hook, str) and isinstance(names, list | tuple | set | frozenset | str)
            for hook, names in raw.items()):
        out = []
        for hook, names in sorted(raw.items()):
            names = [names] if isinstance(names, str) else list(names)
            if not all(isinstance(n, str) for n in names):
                break
            out.append((hook, tuple(sorted(names))))
        else:
            return tuple(out)
    warnings.append(f"{what} = {raw!r:.60} is neither plugin names nor {{hook: plugin names}}; "
                    "it is ignored")
    return ()


def wanted(declared: Constraint, hook: str) -> set[str]:
    """The plugin names a constraint holds for ``hook``."""
    return {n for where, names in declared if where in (EVERY, hook) for n in names}


def arrange(impls: Sequence[Any], hook: str, declared_of: Callable[[str], Any]) -> list[Any]:
    """``impls`` (pluggy's call order; each has ``.plugin`` and ``.wrapper``) with every
    ``AFTER``/``BEFORE`` applied, wrappers and plain ones each among their own kind."""
    wrappers = [i for i in impls if i.wrapper]
    plain = [i for i in impls if not i.wrapper]
    ordered_w, _ = _sorted(wrappers, hook, declared_of)
    ordered_p, _ = _sorted(plain, hook, declared_of)
    return [*ordered_w, *ordered_p]  # wrappers start first, as pluggy calls them


def cycles(impls: Sequence[Any], hook: str, declared_of: Callable[[str], Any]) -> list[str]:
    """The plugins whose constraints in ``hook`` contradict each other (left in pluggy's
    order)."""
    out: list[str] = []
    for kind in (True, False):
        _, stuck = _sorted([i for i in impls if bool(i.wrapper) is kind], hook, declared_of)
        out.extend(stuck)
    return out


def _sorted(impls: list[Any], hook: str, declared_of) -> tuple[list[Any], list[str]]:
    """Kahn's algorithm, always taking the earliest ready one in pluggy's order; what a
    cycle leaves is appended in that order and named."""
    names = [i.plugin for i in impls]
    present = set(names)
    edges: dict[int, set[int]] = {k: set() for k in range(len(impls))}  # k runs before these
    for k, impl in enumerate(impls):
        declared = declared_of(impl.plugin)
        for j, other in enumerate(names):
            if j == k:
                continue
            if other in wanted(getattr(declared, "after", ()), hook) and other in present:
                edges[j].add(k)
            if other in wanted(getattr(declared, "before", ()), hook) and other in present:
                edges[k].add(j)
    if not any(edges.values()):
        return list(impls), []
    waiting = {k: 0 for k in edges}
    for targets in edges.values():
        for t in targets:
            waiting[t] += 1
    done: list[int] = []
    left = set(range(len(impls)))
    while True:
        ready = [k for k in sorted(left) if waiting[k] == 0]
        if not ready:
            break
        k = ready[0]
        left.discard(k)
        done.append(k)
        for t in edges[k]:
            waiting[t] -= 1
    stuck = sorted(left)
    return [impls[k] for k in done + stuck], [names[k] for k in stuck]


def unknown(pm) -> dict[str, list[str]]:
    """{plugin: names its AFTER/BEFORE give that are no plugin known here} (a typo binds
    nothing: ``orch plugins`` says so)."""
    known = {info.name for info in pm.infos.values()}
    out: dict[str, list[str]] = {}
    for name, info in pm.infos.items():
        said = {n for _, names in (*info.declared.after, *info.declared.before) for n in names}
        if said - known:
            out[name] = sorted(said - known)
    return out


def listing(runner, hooks) -> dict[str, list[dict[str, Any]]]:
    """{hook: [{plugin, wrapper}]} in the order ``runner`` (a HookRunner) calls them, for
    every hook with an implementation: what ``orch plugins`` prints."""
    out: dict[str, list[dict[str, Any]]] = {}
    for hook in sorted(hooks):
        impls = runner.impls(hook)
        if impls:
            out[hook] = [{"plugin": i.plugin, "wrapper": bool(i.wrapper)} for i in impls]
    return out


def problems(pm, runner, hooks) -> list[str]:
    """What an ``AFTER``/``BEFORE`` could not do: names no plugin has, contradictions."""
    out = [f"plugin {name}: AFTER/BEFORE names {', '.join(missing)}, which no plugin here "
           "is called (a typo binds nothing)" for name, missing in sorted(unknown(pm).items())]
    for hook in sorted(hooks):
        impls = runner.impls(hook)
        stuck = cycles(impls, hook, pm.declared) if impls else []
        if stuck:
            out.append(f"{hook}: the AFTER/BEFORE of {', '.join(stuck)} contradict each "
                       "other; they keep pluggy's order")
    return out
