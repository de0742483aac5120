"""The pages of ``orch ui``, each built from a record orch already writes: the runs folder
(the one run listing, :mod:`orchestrator.operations.run_index`, and
:func:`orchestrator.engine.rebuild.load_wave`: a run still going as its legs, stages, rounds
and the ledger have it now), a council's
``run.json``/``tally.json`` (drawn by the same code as its ``report.html``), a bench's
result file (its own tables and charts), and the ledger's rollups. Nothing here writes; the
ask page (:mod:`orchestrator.ui.ask`) starts runs through the app's prepare and start, behind
the server's POST guard."""

from __future__ import annotations

import json
import re
from datetime import UTC
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from orchestrator.errors import OrchError
from orchestrator.ui.render import page
from orchestrator.ui.server import FormTokens, Reply

STATIC = Path(__file__).parent / "static"
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")
KINDS = ("wave", "deliberation", "council", "bench")
BRIEFING_SHOWN = 200_000  # bytes of a wave's briefing.md the page shows
PAGE = 200  # runs a page shows: 10,000 rows are megabytes of HTML


def _text(body: str, status: int) -> Reply:
    return Reply(body + "\n", status, "text/plain; charset=utf-8")


def _href(entry: Any) -> str | None:
    """The page of a run; a kind this view has no page for yet (a deliberation) has none."""
    if entry.kind == "council":
        return f"/council/{entry.id}/"
    return f"/{entry.kind}/{entry.id}" if entry.kind in KINDS else None


def not_found(what: str) -> Reply:
    return _text(f"404 {what}", 404)


class View:
    """Routes a GET path to a page; ``runs_dir``/``bench_dir`` as ``orch runs`` reads them,
    the ledger from ORCH_LEDGER_URL (else ORCH_HOME/ledger.db)."""

    def __init__(self, runs_dir: Path, bench_dir: Path | None = None,
                 cache_dir: Path | None = None, *, workspace: Path | None = None,
                 on_request=None) -> None:
        self.runs_dir = runs_dir
        self.bench_dir = bench_dir
        from orchestrator.operations.run_index import RunIndex
        from orchestrator.ui.ask import Ask

        self.index = RunIndex(runs_dir, bench_dir, cache_dir)
        self.forms = FormTokens()  # the server's POST guard takes them back
        self.ask = Ask(runs_dir, self.forms, workspace)
        self.on_request = on_request  # the daemon's: a page visit is activity

    def accepts_post(self, path: str) -> bool:
        """The paths a form may be sent to: the ask form and a run's follow-up."""
        parts = [p for p in path.split("/") if p]
        return parts == ["ask"] or (len(parts) == 3 and parts[0] == "ask"
                                    and bool(SAFE_ID.match(parts[1]))
                                    and parts[2] == "follow-up")

    def post(self, path: str, form: dict[str, list[str]]) -> Reply:
        """A form the server's guard admitted (Host, cookie, Origin, its form token): the
        only routes that start anything, each through the app's prepare and start."""
        if self.on_request is not None:
            self.on_request()
        parts = [p for p in path.split("/") if p]
        if parts == ["ask"]:
            return self.ask.ask(form)
        return self.ask.follow_up(parts[1], form)

    def __call__(self, path: str, query: dict[str, list[str]]) -> Reply:
        if self.on_request is not None:
            self.on_request()
        q = {k: v[-1] for k, v in query.items() if v}
        parts = [p for p in path.split("/") if p]
        if not parts:
            return self.runs(q)
        head, rest = parts[0], parts[1:]
        if head == "ask" and not rest:
            return self.ask.form()
        if head == "static" and len(rest) == 1:
            return self.static(rest[0])
        if head == "spend" and not rest:
            return self.spend(q)
        if head == "spend" and rest == ["chart.svg"]:
            return self.spend_chart(q)
        if head == "search" and not rest:
            return self.search(q)
        if not rest or not SAFE_ID.match(rest[0]):
            return not_found("no such page")
        if head == "ask" and len(rest) in (1, 2):
            reply = self.ask.running(rest[0]) if len(rest) == 1 else \
                self.ask.events(rest[0], q.get("after", "0")) if rest[1] == "events.json" \
                else None
            return reply or self.recorded(rest[0], events=len(rest) == 2)
        if head == "wave" and len(rest) == 1:
            return self.wave(rest[0])
        if head == "wave" and len(rest) == 2 and rest[1] == "legs.json":
            return self.wave_legs(rest[0])
        if head == "deliberation" and len(rest) == 1:
            return self.deliberation(rest[0])
        if head == "council" and len(rest) == 1:
            return self.council(rest[0])
        if head == "council" and len(rest) > 1:
            return self.council_file(rest[0], rest[1:])
        if head == "bench" and len(rest) == 1:
            return self.bench(rest[0])
        if head == "bench" and len(rest) == 3 and rest[1] == "chart":
            return self.bench_chart(rest[0], rest[2])
        return not_found("no such page")

    def recorded(self, run_id: str, *, events: bool) -> Reply:
        """A run started from the ask page that this process no longer holds (``orch ui``
        restarted, or another process started it): its recorded page; its poll says it is
        over and where the record is. A run nobody recorded is a 404."""
        entry = next((e for e in self.listing() if e.id == run_id), None)
        href = _href(entry) if entry is not None else None
        if href is None:
            return not_found(f"no run {run_id} started from this page or recorded")
        if events:
            body = {"events": [], "next": 0, "done": True, "answers": {}, "kind": entry.kind,
                    "record": href}
            return Reply(json.dumps(body), 200, "application/json")
        return Reply("", 303, "text/plain; charset=utf-8", location=href)

    # --- runs -----------------------------------------------------------------------------

    def listing(self) -> list[Any]:
        """Every run, newest first, as ``orch runs`` lists it (the one listing,
        :class:`orchestrator.operations.run_index.RunIndex`: each run's record read once and
        kept under its mtime, so a page over 10,000 runs reads only the records that are new
        or changed, and the runs still going)."""
        return self.index.entries()

    def warm(self) -> None:
        """Read the listing now (``orch ui`` calls it in a thread at start), so the first
        visit of a large runs folder not yet summarised does not wait for it."""
        try:
            self.listing()
        except Exception:  # noqa: BLE001 - the page will say what is wrong when asked
            pass

    def runs(self, q: dict[str, str]) -> Reply:
        from orchestrator.ledger.spend import parse_since

        status, kind, since_text = q.get("status", ""), q.get("kind", ""), q.get("since", "")
        try:
            since = parse_since(since_text) if since_text else None
            page_no = max(1, int(q.get("page", "1") or 1))
        except OrchError as exc:
            return _text(f"400 {exc}".replace("--since", "since"), 400)
        except ValueError:
            return _text("400 page must be a whole number (1, 2, ...)", 400)
        after = since.astimezone(UTC).isoformat() if since is not None else None
        found = [e for e in self.listing()
                 if (not status or e.status == status) and (not kind or e.kind == kind)
                 and (after is None or e.created_at >= after)]
        total = sum(e.cost_usd or 0 for e in found)
        shown = found[(page_no - 1) * PAGE:page_no * PAGE]
        rows = [{"id": e.id, "kind": e.kind, "status": e.status, "legs": e.legs,
                 "question": e.question, "models": e.models,
                 "cost_usd": e.cost_usd, "created": e.created.strftime("%Y-%m-%d %H:%M"),
                 "tag": e.tag, "href": _href(e)} for e in shown]
        filters = {k: v for k, v in (("status", status), ("kind", kind), ("since", since_text))
                   if v}
        more = urlencode({**filters, "page": page_no + 1}) \
            if page_no * PAGE < len(found) else None
        back = urlencode({**filters, "page": page_no - 1}) if page_no > 1 else None
        from orchestrator.operations.run_summary import STATUSES

        return Reply(page("runs.html", title="Runs", rows=rows, count=len(found), status=status,
                          kind=kind, since=since_text, total=total, kinds=KINDS, more=more,
                          back=back, first=(page_no - 1) * PAGE + 1, statuses=STATUSES))

    # --- search ---------------------------------------------------------------------------

    def search(self, q: dict[str, str]) -> Reply:
        """Past runs by the text of their prompts and answers: the same search as ``orch runs
        search`` (:func:`orchestrator.app.search.searched`), newest first; each match's words
        marked. Model text is escaped like every page's."""
        from orchestrator.app.search import searched

        text = q.get("q", "").strip()
        if not text:
            return Reply(page("search.html", title="Search", query="", found=None, runs=[]))
        try:
            found = searched(text, since=q.get("since") or None)
        except OrchError as exc:
            return _text(f"400 {exc}", 400)
        runs = [{"id": r.id, "kind": r.kind, "href": _href(r), "question": r.question,
                 "when": r.last_at.strftime("%Y-%m-%d %H:%M"), "matches": r.matches,
                 "tag": r.tag, "hits": [{"model": h.model, "kind": h.kind, "field": h.field,
                                         "parts": h.parts()}
                                        for h in r.hits]}
                for r in found.runs]
        return Reply(page("search.html", title=f"Search: {text}", query=text, found=found,
                          runs=runs))

    # --- a wave ---------------------------------------------------------------------------

    def _wave_doc(self, wave_id: str) -> dict[str, Any] | None:
        from orchestrator.engine.rebuild import load_wave

        try:
            return load_wave(self.runs_dir, wave_id)
        except OrchError:
            return None

    def wave(self, wave_id: str) -> Reply:
        doc = self._wave_doc(wave_id)
        if doc is None:
            return not_found(f"no wave {wave_id} under {self.runs_dir}")
        briefing = self.runs_dir / doc["wave_id"] / "briefing.md"
        try:
            with briefing.open("rb") as f:
                text = f.read(BRIEFING_SHOWN).decode("utf-8", "replace")
        except OSError:
            text = None
        from orchestrator.app.continuation import refusal
        from orchestrator.operations.runs import children

        # the follow-up box when the wave can be followed up (the app's refusals decide)
        box = self.ask.follow_box(doc["wave_id"]) \
            if refusal(self.runs_dir, doc["wave_id"]) is None else {}
        return Reply(page("wave.html", title=f"Wave {doc['wave_id']}", doc=doc, briefing=text,
                          parent=doc.get("parent_wave_id"),
                          children=children(self.listing(), doc["wave_id"]),
                          live=doc.get("status") == "running",
                          deliberation=doc.get("kind") == "deliberation", **box))

    def wave_legs(self, wave_id: str) -> Reply:
        """What the wave page polls while the wave runs: each leg's progress, as on disk."""
        from orchestrator.ui.render import money, tokens

        doc = self._wave_doc(wave_id)
        if doc is None:
            return not_found(f"no wave {wave_id}")
        legs = [*doc.get("legs", []), *([doc["chair"]] if doc.get("chair") else [])]
        body = {"status": doc.get("status"), "cost": money(doc.get("cost_usd")),
                "tokens": tokens(doc.get("usage")),
                "legs": [{"leg_id": leg.get("leg_id"), "status": leg.get("status"),
                          "reason": leg.get("reason") or "", "cost": money(leg.get("cost_usd")),
                          "tokens": tokens(leg.get("usage")),
                          "seconds": f"{leg.get('duration_s') or 0:.1f}",
                          "steps": str(leg.get("steps") or 0),
                          "answer": leg.get("answer") or ""} for leg in legs]}
        return Reply(json.dumps(body), 200, "application/json")

    # --- a deliberation --------------------------------------------------------------------

    def deliberation(self, run_id: str) -> Reply:
        from orchestrator.ui.deliberation import rounds_view

        doc = self._wave_doc(run_id)
        if doc is None or doc.get("kind") != "deliberation":
            return not_found(f"no deliberation {run_id} under {self.runs_dir}")
        view = rounds_view(self.runs_dir / doc["wave_id"] / "rounds", doc)
        return Reply(page("deliberation.html", title=f"Deliberation {doc['wave_id']}", doc=doc,
                          **view))

    # --- a council ------------------------------------------------------------------------

    def _council_dir(self, run_id: str) -> Path | None:
        folder = self.runs_dir / f"council-{run_id.removeprefix('council-')}"
        return folder if (folder / "run.json").is_file() else None

    def council(self, run_id: str) -> Reply:
        from orchestrator.council.report_html import report_html
        from orchestrator.operations.run_summary import current
        from orchestrator.store import read_json

        folder = self._council_dir(run_id)
        if folder is None:
            return not_found(f"no council {run_id} under {self.runs_dir}")
        doc = current(read_json(folder / "run.json"), folder)  # a running one: as it is now
        tally = read_json(folder / "tally.json") if (folder / "tally.json").is_file() else None
        chair = folder / "chair-output.md"
        synthesis = chair.read_text(encoding="utf-8", errors="replace") if chair.is_file() \
            else None
        html = report_html(doc, tally, synthesis)  # the report's own drawing, escaped there
        body = html[html.index("<body>") + len("<body>"):html.rindex("</body>")]
        from markupsafe import Markup

        return Reply(page("council.html", title=f"Council {doc.get('run_id', run_id)}",
                          report=Markup(body), doc=doc))

    def council_file(self, run_id: str, rest: list[str]) -> Reply:
        """A file of the council's folder (the report's links), as plain text, confined to
        that folder (no ``..``, no symlink out)."""
        folder = self._council_dir(run_id)
        if folder is None or any(p in ("..", ".") or p.startswith(".") for p in rest):
            return not_found("no such file")
        target = folder.joinpath(*rest)
        try:
            inside = target.resolve(strict=True).is_relative_to(folder.resolve())
        except OSError:
            inside = False
        if not inside or not target.is_file():
            return not_found("no such file")
        return Reply(target.read_bytes()[:5_000_000], 200, "text/plain; charset=utf-8")

    # --- a bench --------------------------------------------------------------------------

    def _bench_doc(self, bench_id: str) -> dict[str, Any] | None:
        from orchestrator.operations.benches import results

        return results(self.bench_dir, bench_id)

    def bench(self, bench_id: str) -> Reply:
        from orchestrator.bakeoff import report

        doc = self._bench_doc(bench_id)
        if doc is None:
            return not_found(f"no bench {bench_id} under {self.bench_dir}")
        stats = doc.get("stats")
        tables = report.tables(stats) if stats else []
        notes = report.notes(doc) if stats else []
        from orchestrator.bakeoff import charts

        return Reply(page("bench.html", title=f"Bench {doc.get('bench_id', bench_id)}",
                          doc=doc, bench_id=bench_id, tables=tables, notes=notes,
                          charts=3 if stats and charts.available() else 0,
                          trials=[t for t in doc.get("trials") or [] if isinstance(t, dict)]))

    def bench_chart(self, bench_id: str, name: str) -> Reply:
        from orchestrator.bakeoff import charts

        doc = self._bench_doc(bench_id)
        if doc is None or not doc.get("stats") or not name.removesuffix(".svg").isdigit():
            return not_found("no such chart")
        svgs = charts.draw(doc["stats"]) or []
        n = int(name.removesuffix(".svg"))
        if n >= len(svgs):
            return not_found("no such chart")
        return Reply(svgs[n], 200, "image/svg+xml")

    # --- spend ----------------------------------------------------------------------------

    def _spend(self, q: dict[str, str]):
        from orchestrator.ledger.spend import parse_since

        since_text = q.get("since", "30d") or "30d"
        since = None if since_text.strip().lower() == "all" else parse_since(since_text)
        by = q.get("by", "model")
        from orchestrator.ledger.spend_series import SERIES_BY

        if by not in SERIES_BY:
            raise OrchError(f"cannot group spend by {by!r}; use one of {', '.join(SERIES_BY)}")
        return since_text, since, by

    def spend(self, q: dict[str, str]) -> Reply:
        from orchestrator.ledger.spend_series import SERIES_BY
        from orchestrator.ui import spend as spend_mod

        try:
            since_text, since, by = self._spend(q)
        except OrchError as exc:
            return _text(f"400 {exc}", 400)
        data = spend_mod.rollup(since, by)
        return Reply(page("spend.html", title="Spend", data=data, by=by, since=since_text,
                          choices=SERIES_BY, chart_query=f"since={since_text}&by={by}"))

    def spend_chart(self, q: dict[str, str]) -> Reply:
        from orchestrator.ui import spend as spend_mod
        from orchestrator.ui.charts import stacked_bars

        try:
            _, since, by = self._spend(q)
        except OrchError as exc:
            return _text(f"400 {exc}", 400)
        return Reply(stacked_bars(spend_mod.series(since, by)), 200, "image/svg+xml")

    # --- files ----------------------------------------------------------------------------

    def static(self, name: str) -> Reply:
        if name == "council.css":  # the council report's own style, one source
            from orchestrator.council.report_html import STYLE

            return Reply(STYLE, 200, STATIC_TYPES[".css"])
        path = STATIC / name
        if path.suffix not in STATIC_TYPES or not path.is_file():
            return not_found("no such file")
        return Reply(path.read_bytes(), 200, STATIC_TYPES[path.suffix])

