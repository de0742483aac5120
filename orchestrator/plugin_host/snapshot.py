"""What a plugin is made of, read once, through the runner, as plain values.

A plugin module's attributes are its own code to read: a module ``__getattr__`` or
``__dir__``, a class's properties run when orch looks. So orch looks once, when the plugin is
loaded, on the runner's worker (boundary.call_blocking): its hook functions (what pluggy
registers: a plain namespace of them, never the object), the warnings about them, the
constants it declares (``FAIL_CLOSED``, ``HOOK_DEADLINE_S``, ``CONFIG_SCHEMA``, ``NAME``,
``KEY_VARIABLES``, ``AFTER``, ``BEFORE``) as plain copies, and the files its code came from.
Everything later reads this record.
"""

from __future__ import annotations

import ast
import inspect
import json
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.plugin_host.deadline import declared_deadline


@dataclass(frozen=True)
class Declared:
    """The constants a plugin module declares, checked."""

    fail_closed: bool | frozenset[str] = False  # True: every hook; else these hooks
    deadline_s: float | None = None  # HOOK_DEADLINE_S
    config_schema: dict[str, Any] | None = None  # CONFIG_SCHEMA, a JSON copy
    name: str | None = None  # NAME
    key_variables: tuple[str, ...] = ()  # KEY_VARIABLES: what a run hands it (keys.py)
    problems: tuple[str, ...] = ()  # what stops a run (a HOOK_DEADLINE_S that is no number)
    # AFTER / BEFORE: ((hook or "*", (plugin names...)), ...) (order.py)
    after: tuple[tuple[str, tuple[str, ...]], ...] = ()
    before: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def fails_closed(self, hook: str) -> bool:
        return self.fail_closed is True or (
            isinstance(self.fail_closed, frozenset) and hook in self.fail_closed)


@dataclass
class Snapshot:
    hooks: dict[str, Callable[..., Any]]  # attribute -> function pluggy registers
    warnings: list[str] = field(default_factory=list)
    declared: Declared = field(default_factory=Declared)
    files: list[str] = field(default_factory=list)

    def namespace(self) -> types.SimpleNamespace:
        """What pluggy registers: the hook functions and nothing of the plugin's object."""
        return types.SimpleNamespace(**self.hooks)


def take(pm, plugin: object, name: str, hook_names: frozenset[str]) -> Snapshot:
    """Read ``plugin`` (plugin code runs here: call it through the runner)."""
    marked: dict[str, tuple[str, dict]] = {}
    hooks: dict[str, Callable[..., Any]] = {}
    for attr in dir(plugin):
        opts = pm.parse_hookimpl_opts(plugin, attr)
        if opts is None:
            continue
        function = getattr(plugin, attr)
        if not (inspect.isfunction(function) or inspect.ismethod(function)):
            continue  # a callable object: its attributes would be its own code again
        marked[attr] = (opts.get("specname") or attr, opts)
        hooks[attr] = function
    warnings = []
    for attr, (hook, opts) in marked.items():
        if hook not in hook_names:
            spec = "" if hook == attr else f" (specname {hook!r})"
            warnings.append(f"hook implementation {attr!r}{spec} matches no hook (typo?)")
        elif opts.get("hookwrapper"):
            warnings.append(f"{attr} uses hookwrapper=True, which orch does not call; "
                            "use @hookimpl(wrapper=True)")
    named = {hook for hook, _ in marked.values()}
    for attr in sorted(hook_names - set(marked) - named):
        if callable(getattr(plugin, attr, None)):
            warnings.append(f"{attr} is not marked @hookimpl, so it never runs")
    declared, more = read_declared(plugin, name)
    return Snapshot(hooks=hooks, warnings=warnings + more, declared=declared,
                    files=_files(plugin, hooks.values()))


def read_declared(plugin: object, name: str) -> tuple[Declared, list[str]]:
    """The plugin's constants (plugin code runs here), checked; and warnings about them."""
    warnings: list[str] = []
    raw = getattr(plugin, "FAIL_CLOSED", False)  # runner: on the worker (or a built-in)
    fail_closed = _fail_closed(raw, warnings)
    raw = getattr(plugin, "HOOK_DEADLINE_S", None)  # runner: on the worker (or a built-in)
    deadline, problem = declared_deadline(raw, name)
    schema = getattr(plugin, "CONFIG_SCHEMA", None)  # runner: on the worker (or a built-in)
    if schema is None and not isinstance(plugin, types.ModuleType):
        module = sys.modules.get(type(plugin).__module__)
        schema = getattr(module, "CONFIG_SCHEMA", None)  # runner: on the worker
    if schema is not None:
        try:
            schema = json.loads(json.dumps(schema))
        except (TypeError, ValueError, RecursionError):
            schema = None
        if not isinstance(schema, dict):
            warnings.append("CONFIG_SCHEMA is not a JSON object; its plugin_config section "
                            "is not checked")
            schema = None
    own_name = getattr(plugin, "NAME", None)  # runner: on the worker (or a built-in)
    raw = getattr(plugin, "KEY_VARIABLES", ())  # runner: on the worker (or a built-in)
    from orchestrator.plugin_host.order import constraint

    after = constraint("AFTER", getattr(plugin, "AFTER", ()), warnings)  # runner: worker
    before = constraint("BEFORE", getattr(plugin, "BEFORE", ()), warnings)  # runner: worker
    return Declared(fail_closed=fail_closed, deadline_s=deadline, config_schema=schema,
                    name=own_name if isinstance(own_name, str) else None,
                    key_variables=_key_variables(raw, warnings),
                    problems=(problem,) if problem else (), after=after,
                    before=before), warnings


def _key_variables(raw: Any, warnings: list[str]) -> tuple[str, ...]:
    """``KEY_VARIABLES``: the environment variables the plugin reads through
    ``orchestrator.keys.read`` (a run declares them, so they reach it in the daemon too)."""
    from orchestrator.models.key_names import valid_name

    if isinstance(raw, str):
        raw = (raw,)
    names = list(raw) if isinstance(raw, list | tuple | set | frozenset) else [raw]
    good = tuple(dict.fromkeys(n for n in names if isinstance(n, str) and valid_name(n)))
    if len(good) != len(names):
        warnings.append("KEY_VARIABLES must be a tuple of variable names (e.g. "
                        "(\"MY_SERVICE_KEY\",)); the others are ignored")
    return good


def _fail_closed(raw: Any, warnings: list[str]) -> bool | frozenset[str]:
    """``FAIL_CLOSED``: True/False, or hook names. Anything else fails closed everywhere (a
    guard that says it wants to fail closed, however it says it, is taken at its word)."""
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        return frozenset({raw})
    if isinstance(raw, list | tuple | set | frozenset) and all(isinstance(h, str) for h in raw):
        return frozenset(raw)
    if raw is None or raw == 0:
        return False
    warnings.append(f"FAIL_CLOSED = {raw!r:.40} is neither True/False nor hook names; it "
                    "fails closed in every hook")
    return True


def _files(plugin: object, functions) -> list[str]:
    out: set[str] = set()
    for function in functions:
        code = getattr(inspect.unwrap(getattr(function, "__func__", function)), "__code__",
                       None)
        if code is not None:
            out.add(code.co_filename)
    module = plugin if isinstance(plugin, types.ModuleType) else \
        sys.modules.get(type(plugin).__module__)
    where = getattr(module, "__file__", None)
    if isinstance(where, str):
        out.add(where)
    return sorted(out)


def fail_closed_in_source(module_name: str) -> bool | frozenset[str]:
    """``FAIL_CLOSED`` as written at the top of a module that could not be imported: read
    from its source, never run (a guard whose import fails still said what it is)."""
    import importlib.util

    try:
        if module_name.endswith(".py"):  # a single-file plugin: its path (directory.py)
            origin = module_name
        else:
            spec = importlib.util.find_spec(module_name.split(":")[0].strip())
            origin = spec.origin if spec is not None else None
        if not origin or not origin.endswith(".py"):
            return False
        with open(origin, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), origin)
    except Exception:  # noqa: BLE001 - unreadable: it said nothing
        return False
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) and node.value else []
        if any(isinstance(t, ast.Name) and t.id == "FAIL_CLOSED" for t in targets):
            try:
                return _fail_closed(ast.literal_eval(node.value), [])
            except (ValueError, TypeError, SyntaxError, RecursionError):
                return True  # computed: it wants to fail closed somehow
    return False
