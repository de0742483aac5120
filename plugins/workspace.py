"""Read-only workspace tools: ``read``, ``grep``, ``glob``, ``list``, confined to the root.

Legs become agents that can look at the code they are asked about, but only under the wave's
workspace (``orch fanout --workspace DIR``, default the current directory), and only when the
wave's ``tools`` option is ``read`` (the default; ``--tools none`` offers nothing). Every result
is bounded and says what it left out and which narrower call gets the rest; a ``read`` that
would not fit the context room left for the next request is refused with the arithmetic
instead of overflowing the window.

Settings (``plugin_config.workspace``): ``max_result_chars``, ``read_lines``,
``max_line_chars``, ``grep_matches``, ``max_entries``, ``max_file_bytes``, ``reserve_tokens``,
``max_scan_bytes``, ``max_seconds``.

Execution: every call runs on its own worker thread with a hard deadline
(:mod:`orchestrator.tool_thread`), so no call can stop the wave's other legs, a leg's time
limit ends it mid-call, and the process never waits for it at exit. Patterns run on RE2
(linear time: no pattern can take exponentially long). A call stops at ``max_scan_bytes``
read or ``max_seconds`` spent and its result names the limit it hit.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from typing import Any

from orchestrator import tool_thread
from orchestrator.hookspecs import hookimpl
from orchestrator.security.credential_content import MARK, block_lines, note, withhold
from orchestrator.tools import Tool
from orchestrator.workspace.paths import Refused, Workspace, glob_regex, kind
from orchestrator.workspace.policy import withheld_note

NAME = "workspace"
DEFAULTS: dict[str, int] = {
    "max_result_chars": 12_000,  # ~3k tokens: one result never dominates a request
    "read_lines": 300,
    "max_line_chars": 400,
    "grep_matches": 50,
    "max_entries": 200,
    "max_file_bytes": 8_000_000,  # grep skips bigger files; read refuses them
    "max_scan_bytes": 64_000_000,  # bytes one grep reads before it stops and says so
    "max_seconds": 10,  # wall time of one call (walking a big tree included)
}
CONFIG_SCHEMA = {"type": "object", "properties": {  # orchestrator.plugin_host.config_check
    **{key: {"type": "integer", "minimum": 1} for key in DEFAULTS},
    "reserve_tokens": {"type": "integer", "minimum": 0},
    "deny": {"type": "array", "items": {"type": "string"}},
    "allow": {"type": "array", "items": {"type": "string"}}}}
SCAN_CHECK_LINES = 4_096  # lines between looks at the clock inside one file
# A read's tokens are counted this many times over: estimates of new text run low on code,
# and the context guard counts the turns since the provider's last report the same way.
READ_COUNT_FACTOR = 2
MAX_REFUSALS_RECORDED = 20

_PATH = {"type": "string", "description": "Path relative to the workspace root."}
SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    "read": ("Read a text file from the workspace. Returns numbered lines; use offset and "
             "limit to read part of a long file.",
             {"type": "object", "properties": {
                 "path": _PATH,
                 "offset": {"type": "integer", "minimum": 1,
                            "description": "First line to read (1-based). Default 1."},
                 "limit": {"type": "integer", "minimum": 1,
                           "description": "Number of lines to read. Default 300."}},
              "required": ["path"]}),
    "grep": ("Search file contents in the workspace with a regular expression "
             "(RE2 syntax: no backreferences or lookaround; (?i) for case-insensitive). "
             "Returns path:line: text.",
             {"type": "object", "properties": {
                 "pattern": {"type": "string", "description": "Regular expression."},
                 "path": {"type": "string",
                          "description": "File or directory to search. Default the root."},
                 "glob": {"type": "string",
                          "description": "Only files matching this glob, e.g. *.py"}},
              "required": ["pattern"]}),
    "glob": ("Find files in the workspace by name pattern, e.g. **/*.py or src/*.md.",
             {"type": "object", "properties": {
                 "pattern": {"type": "string", "description": "Glob pattern; ** spans "
                             "directories."}},
              "required": ["pattern"]}),
    "list": ("List a directory of the workspace: subdirectories end with /, files show "
             "their size.",
             {"type": "object", "properties": {
                 "path": {"type": "string", "description": "Directory relative to the "
                          "workspace root. Default the root."}}}),
}


@hookimpl(trylast=True)
def register_tools(leg):
    """Offer the tools when the wave allows them and the leg has a workspace to read.

    The chair is left out: it synthesises the answers it is handed."""
    if leg.options.get("tools", "read") != "read" or leg.workspace is None:
        return None
    if leg.kind == "chair":
        return None
    tools = WorkspaceTools(leg)
    return [Tool(name, description, parameters, tools.bind(name), meta={"read_only": True})
            for name, (description, parameters) in SCHEMAS.items()]


class WorkspaceTools:
    """The four tools bound to one leg: its root, its settings, its context room."""

    def __init__(self, leg) -> None:
        self.leg = leg
        settings = leg.plugin_config(NAME)
        self.ws = Workspace(leg.workspace, settings.get("deny", ()), settings.get("allow", ()))
        self.cfg = {**DEFAULTS, **{k: v for k, v in leg.plugin_config(NAME).items()
                                   if k in (*DEFAULTS, "reserve_tokens") and isinstance(v, int)}}

    def bind(self, name: str) -> Callable[..., Any]:
        impl = getattr(self, f"do_{name}")
        allowed = set(SCHEMAS[name][1]["properties"])

        async def call(**args: Any) -> str:
            unknown = sorted(set(args) - allowed)
            if unknown:
                return (f"error: {name} has no argument {', '.join(map(repr, unknown))}; "
                        f"it takes {', '.join(sorted(allowed))}")
            try:
                # its own daemon thread, a hard deadline; the leg's timeout ends the wait
                return await tool_thread.run_sync(lambda: impl(**args),
                                                  seconds=self.cfg["max_seconds"])
            except tool_thread.ToolTimeout as exc:
                return (f"error: {name} {exc} (max_seconds); narrow it: a path=\"some/dir\", "
                        "a glob, or a more specific pattern")
            except Refused as refused:
                self._record(name, args, str(refused))
                return f"error: {refused}"
            except OSError as exc:
                where = self.ws.rel(exc.filename) if isinstance(exc.filename, str) else "a file"
                return f"error: {name} could not read {where!r} ({exc.strerror or exc})"

        return call

    def _record(self, tool: str, args: dict[str, Any], why: str) -> None:
        refusals = self.leg.record.extra.get("workspace_refusals", [])
        if len(refusals) < MAX_REFUSALS_RECORDED:
            target = args.get("path") or args.get("pattern")
            self.leg.set("workspace_refusals",
                         [*refusals, {"tool": tool, "target": str(target)[:200],
                                      "why": why[:300]}])

    # -- read ----------------------------------------------------------------------------
    def do_read(self, path: Any = None, offset: Any = 1, limit: Any = None) -> str:
        if not path:
            raise Refused("read needs a file path, e.g. read(path=\"README.md\"); "
                          "list(path=\".\") shows what is there")
        offset = _positive(offset, "offset", 1)
        limit = min(_positive(limit, "limit", self.cfg["read_lines"]), 100_000)
        real = self.ws.resolve(path, want="file")
        rel = self.ws.rel(real)
        size = os.path.getsize(real)
        if size > self.cfg["max_file_bytes"]:
            raise Refused(f"{rel!r} is {size:,} bytes, more than the {self.cfg['max_file_bytes']:,}"
                          f" this tool reads; grep(pattern=..., path={rel!r}) for the lines "
                          "you need")
        self.ws.check_text(real)
        lines, total, cut_by_chars, rules = self._lines(real, offset, limit)
        if offset > max(total, 1):
            raise Refused(f"{rel!r} has {total:,} lines; offset {offset} is past its end")
        last = offset + len(lines) - 1
        withheld = withhold("".join(lines))  # one pass: ~0.6 ms for 300 lines, 0.5 ms a line
        body, rules = withheld.text, rules | set(withheld.rules)
        head = f"{rel} (lines {offset}-{last} of {total:,})\n" if lines else f"{rel} (empty)\n"
        foot = ""
        if last < total:
            why = (f"stopped at {self.cfg['max_result_chars']:,} characters"
                   if cut_by_chars else f"limit {limit}")
            foot = (f"[{why}; {total - last:,} more lines: read(path={rel!r}, "
                    f"offset={last + 1}, limit={max(len(lines), 1)})]\n")
        if rules:
            foot += note(rules) + "\n"
        result = head + body + foot
        self._check_room(rel, offset, len(lines), result)
        return result

    def _lines(self, real: str, offset: int, limit: int
               ) -> tuple[list[str], int, bool, set[str]]:
        """The numbered lines offset..offset+limit-1 within the character cap, with their
        credential content withheld; the file's line count; the rules that withheld."""
        out: list[str] = []
        used, total, cut = 0, 0, False
        rules: set[str] = set()
        cap, width = self.cfg["max_result_chars"], self.cfg["max_line_chars"]
        with open(real, encoding="utf-8", errors="replace", newline="") as fh:
            all_lines = fh.readlines()
        # a key's body is withheld even when its BEGIN is not shown (found over the file)
        in_key = block_lines(all_lines)
        for total, line in enumerate(all_lines, start=1):  # noqa: B007 - total is the count
            if total < offset or cut or len(out) >= limit:
                continue
            text = line.rstrip("\r\n")
            if total - 1 in in_key:  # the rest is withheld over the whole result, in one pass
                rules.add("private-key")
                text = MARK.format(rule="private-key")
            if len(text) > width:
                text = f"{text[:width]} [... {len(text) - width:,} more characters]"
            numbered = f"{total:>6}\t{text}\n"
            if used + len(numbered) > cap and out:
                cut = True
                continue
            out.append(numbered)
            used += len(numbered)
        total = len(all_lines)
        return out, total, cut, rules

    def _check_room(self, rel: str, offset: int, n_lines: int, result: str) -> None:
        """Refuse a result the next request has no room for, with the arithmetic."""
        from orchestrator.models.estimate import estimate_messages, estimate_text
        from orchestrator.models.reserve import answer_reserve

        window = self._window()
        if not window or n_lines == 0:
            return
        schemas = [t.schema() for t in self.leg.tools.values()]
        model = self.leg.model.litellm_model
        used = estimate_messages(self.leg.messages, schemas, model=model)
        # The context guard's reserve (proportional to the window), so a read let through
        # here never leaves the next request refused for starvation.
        reserve = self.cfg.get("reserve_tokens")
        reserve = answer_reserve(window) if reserve is None else int(reserve)
        reserve = max(reserve, min(int(self.leg.model.sampling.get("max_tokens") or 0),
                                   window // 2))
        room = window - used - reserve
        cost = estimate_text(result, model) + 4
        counted = cost * READ_COUNT_FACTOR
        if counted <= room:
            return
        fit = int(max(room, 0) * 0.8 / max(counted / n_lines, 1))
        arithmetic = (f"lines {offset}-{offset + n_lines - 1} of {rel!r} come to about "
                      f"{cost:,} tokens, counted {READ_COUNT_FACTOR}x to be safe: {counted:,}, "
                      f"but this request has about {max(room, 0):,} tokens of room (context "
                      f"window {window:,} - {used:,} already in the conversation - "
                      f"{reserve:,} kept for the answer)")
        if fit >= 5:
            raise Refused(f"read refused: {arithmetic}. Read a narrower range, e.g. "
                          f"read(path={rel!r}, offset={offset}, limit={fit}), or grep for "
                          "the lines you need")
        raise Refused(f"read refused: {arithmetic}. There is no room left for more file "
                      "content: answer from what you have already read")

    def _window(self) -> int | None:
        from orchestrator.models.catalog import model_info

        model = self.leg.model
        declared = self.leg.config.providers.get(model.provider) if model.declared else None
        try:
            return model_info(model, declared).context_window
        except Exception:
            return None

    # -- grep ----------------------------------------------------------------------------
    def do_grep(self, pattern: Any = None, path: Any = None, glob: Any = None) -> str:
        if not isinstance(pattern, str) or not pattern:
            raise Refused("grep needs a pattern, e.g. grep(pattern=\"def main\")")
        regex = compile_pattern(pattern)
        name_filter = self._glob_filter(glob)
        start = self.ws.resolve(path)
        cap, width = self.cfg["grep_matches"], self.cfg["max_line_chars"]
        matches: list[str] = []
        rules: set[str] = set()
        skipped: dict[str, int] = {}
        more, used, scanned, limit = False, 0, 0, None
        max_scan = self.cfg["max_scan_bytes"]
        for walked, is_dir in self.ws.walk(start):
            if tool_thread.expired():
                limit = self._time_limit()
                break
            if is_dir:
                continue
            rel = self.ws.rel(walked)
            if name_filter and not (name_filter.match(rel)
                                    or name_filter.match(os.path.basename(rel))):
                continue
            real, why = self.ws.readable(walked)
            if real is not None and os.path.getsize(real) > self.cfg["max_file_bytes"]:
                real, why = None, f"larger than {self.cfg['max_file_bytes']:,} bytes"
            if real is None:
                skipped[why] = skipped.get(why, 0) + 1
                continue
            try:
                self.ws.check_text(real)
                with open(real, encoding="utf-8", errors="replace") as fh:
                    lines = fh.readlines()
                keys = block_lines(lines)  # a key's body, whether or not its BEGIN matches
                for n, line in enumerate(lines, start=1):
                    in_key = n - 1 in keys
                    scanned += len(line)
                    if scanned > max_scan:
                        limit = (f"stopped after reading {max_scan:,} bytes "
                                 "(max_scan_bytes)")
                        break
                    if n % SCAN_CHECK_LINES == 0 and tool_thread.expired():
                        limit = self._time_limit()
                        break
                    if not regex.search(line):
                        continue
                    # the pattern must match what the model may see: no match inside a
                    # credential, or grep would be an oracle for its characters
                    found: set[str] = set()
                    text = _shown(line.rstrip("\r\n"), in_key, found)
                    if found and not regex.search(text):
                        continue
                    rules |= found
                    if len(matches) >= cap or used > self.cfg["max_result_chars"]:
                        more = True
                        break
                    text = text if len(text) <= width else text[:width] + " [...]"
                    matches.append(f"{rel}:{n}: {text}")
                    used += len(matches[-1]) + 1
            except Refused:
                continue  # binary: not text to search
            except OSError:
                skipped["unreadable"] = skipped.get("unreadable", 0) + 1
            if more or limit:
                break
        where = self.ws.rel(start)
        if not matches:
            result = f"no matches for {pattern!r} under {where!r}"
            if glob:
                result += f" in files matching {glob!r}"
        else:
            result = "\n".join(matches)
            if more:
                result += (f"\n[first {len(matches)} matches shown; there are more. Narrow "
                           "it: a more specific pattern, path=\"some/dir\", or glob=\"*.py\"]")
        if skipped:
            reasons = "; ".join(f"{n} {why}" for why, n in sorted(skipped.items()))
            result += f"\n[files not searched: {reasons}]"
        if limit:
            result += (f"\n[{limit}: the search is incomplete; narrow it with "
                       "path=\"some/dir\" or glob=\"*.py\"]")
        if rules:
            result += "\n" + note(rules)
        return _with_note(result, self.ws.withheld)

    @staticmethod
    def _time_limit() -> str:
        return f"stopped at the {tool_thread.seconds_allowed() or 0:g} s limit (max_seconds)"

    def _glob_filter(self, glob: Any):
        if glob in (None, ""):
            return None
        if not isinstance(glob, str):
            raise Refused("glob must be a string like \"*.py\"")
        self._check_pattern(glob)
        return _glob_compiled(glob)

    @staticmethod
    def _check_pattern(pattern: str) -> None:
        if pattern.startswith(("/", "~")) or ".." in pattern.replace("\\", "/").split("/"):
            raise Refused(f"pattern {pattern!r} must stay under the workspace root: no "
                          "leading / or ~, no '..'; e.g. \"src/**/*.py\"")

    # -- glob ----------------------------------------------------------------------------
    def do_glob(self, pattern: Any = None) -> str:
        if not isinstance(pattern, str) or not pattern.strip():
            raise Refused("glob needs a pattern, e.g. glob(pattern=\"**/*.py\")")
        pattern = pattern.strip().removeprefix("./")
        self._check_pattern(pattern)
        regex = _glob_compiled(pattern)
        found: list[str] = []
        total, limit = 0, None
        for walked, is_dir in self.ws.walk(self.ws.root):
            if tool_thread.expired():
                limit = self._time_limit()
                break
            rel = self.ws.rel(walked)
            if regex.match(rel):
                total += 1
                if len(found) < self.cfg["max_entries"]:
                    found.append(rel + ("/" if is_dir else ""))
        stopped = (f"\n[{limit}: not every directory was walked; narrow the pattern, e.g. "
                   "a directory prefix like \"src/**/*.py\"]") if limit else ""
        if not found:
            return _with_note(f"no paths match {pattern!r} (patterns are relative to the "
                              "workspace root; ** spans directories, e.g. \"**/*.py\")"
                              + stopped, self.ws.withheld)
        result = "\n".join(found)
        if total > len(found):
            result += (f"\n[{len(found)} of {total:,} paths shown; narrow the pattern, "
                       "e.g. a directory prefix like \"src/**/*.py\"]")
        return _with_note(result + stopped, self.ws.withheld)

    # -- list ----------------------------------------------------------------------------
    def do_list(self, path: Any = None) -> str:
        real = self.ws.resolve(path, want="dir")
        rel = self.ws.rel(real)
        try:
            names = sorted(os.listdir(real))
        except OSError as exc:
            raise Refused(f"{rel!r} cannot be listed ({exc.strerror})") from None
        rows: list[tuple[int, str]] = []
        self.ws.withheld = {}
        for name in names:
            full = os.path.join(real, name)
            if self.ws.hidden(full, os.path.isdir(full) and not os.path.islink(full)):
                continue  # deny-listed or .gitignored: counted, said below
            if os.path.islink(full):
                target = os.path.realpath(full)
                where = (f"-> {self.ws.rel(target)}" if self.ws.inside(target)
                         else "-> (outside the workspace; cannot be read)")
                rows.append((1, f"{name} {where}"))
            elif os.path.isdir(full):
                rows.append((0, f"{name}/"))
            else:
                try:
                    mode = os.stat(full)
                except OSError:
                    continue
                if stat.S_ISREG(mode.st_mode):
                    rows.append((1, f"{name}  {_size(mode.st_size)}"))
                else:
                    rows.append((1, f"{name}  ({kind(mode.st_mode)}; cannot be read)"))
        rows.sort(key=lambda r: r[0])
        cap = self.cfg["max_entries"]
        shown = [r[1] for r in rows[:cap]]
        head = f"{rel}/ ({len(rows)} entries)" if rows else f"{rel}/ (empty)"
        result = "\n".join([head, *shown])
        if len(rows) > cap:
            prefix = "" if rel == "." else rel + "/"
            result += (f"\n[{cap} of {len(rows):,} entries shown; use glob(pattern="
                       f"{prefix + '*.py'!r}) or list a subdirectory to see the rest]")
        return _with_note(result, self.ws.withheld)


def _shown(text: str, in_key: bool, rules: set[str]) -> str:
    """A line as the model may see it: credential content withheld, rules added to
    ``rules``."""
    if in_key:
        rules.add("private-key")
        return MARK.format(rule="private-key")
    masked = withhold(text)
    rules.update(masked.rules)
    return masked.text


def _with_note(result: str, withheld: dict[str, int]) -> str:
    note = withheld_note(withheld)
    return f"{result}\n{note}" if note else result


def _glob_compiled(pattern: str):
    """A glob's regex on RE2 too: ``**/**/**/...`` must not backtrack either."""
    return compile_pattern(glob_regex(pattern)[:-2] + r"\z")


def compile_pattern(pattern: str):
    """The model's pattern on RE2: matching time grows with the text, never exponentially,
    whatever the pattern (``(a+)+$`` included)."""
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would print parse errors on stderr itself
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        why = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(
            exc.args[0], bytes) else str(exc)
        raise Refused(f"pattern {pattern!r} is not a valid RE2 regular expression ({why}); "
                      "RE2 has no backreferences or lookaround, and special characters "
                      "like ( [ . need a backslash") from None


def _positive(value: Any, name: str, default: int) -> int:
    """Small models send numbers as strings; accept "10", refuse nonsense with a fix."""
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise Refused(f"{name} must be a whole number >= 1, got {json.dumps(value)}") from None
    if number < 1:
        raise Refused(f"{name} must be >= 1 (lines are numbered from 1), got {number}")
    return number


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
