"""``report.html``: a page a person opens to see the council at a glance.

A verdict banner; a card per seat; a judges × findings matrix of the votes, colour-coded;
findings by tier with severity badges and every claim of a group; the dissent; the chair's
synthesis; links to the files behind it. Self-contained (inline style, no scripts, no links
out, no fonts or images fetched) and printable. Every piece of model text is escaped, and the
synthesis is rendered as markdown with raw HTML off, so a review cannot inject markup.
"""

from __future__ import annotations

from html import escape
from typing import Any

from orchestrator.council.artifacts import slug
from orchestrator.council.tally import CONCURRENCE_LINE, SEVERITIES, TIERS, dissent

STYLE = """
:root{--agree:#1a7f37;--dispute:#cf222e;--neutral:#8c959f;--ink:#1f2328;--line:#d0d7de}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--ink);
max-width:76rem;margin:0 auto;padding:1.5rem}
h1{font-size:1.4rem;margin:.2rem 0}h2{font-size:1.15rem;margin:1.8rem 0 .6rem;
border-bottom:1px solid var(--line);padding-bottom:.2rem}
.banner{border-radius:10px;padding:1rem 1.25rem;color:#fff;background:#57606a}
.banner.ship{background:#1a7f37}.banner.fix-first{background:#9a6700}
.banner.rethink{background:#cf222e}.banner.running{background:#0969da}.banner .big{font-size:1.6rem;font-weight:700}
.banner p{margin:.25rem 0}.line{font-style:italic;color:#57606a}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(15rem,1fr));gap:.75rem}
.card{border:1px solid var(--line);border-radius:8px;padding:.75rem}
.card h3{font-size:1rem;margin:0 0 .3rem;word-break:break-all}
.card.lost{opacity:.7;border-style:dashed}.muted{color:#57606a;font-size:.85rem}
.badge{display:inline-block;border-radius:999px;padding:0 .5rem;font-size:.78rem;
font-weight:600;color:#fff;margin-right:.2rem}
.badge.blocker{background:#82071e}.badge.major{background:#cf222e}
.badge.minor{background:#9a6700}.badge.nit{background:#6e7781}
.tag{display:inline-block;border:1px solid var(--line);border-radius:4px;padding:0 .35rem;
font-size:.78rem;margin-right:.2rem}
.tag.bad{border-color:var(--dispute);color:var(--dispute)}
.tag.good{border-color:var(--agree);color:var(--agree)}
table{border-collapse:collapse;margin:.4rem 0}
th,td{border:1px solid var(--line);padding:.25rem .45rem;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}
.matrix td{text-align:center;font-size:.8rem;min-width:4.2rem}
.v-agree{background:#dafbe1;color:#116329}.v-dispute{background:#ffebe9;color:#a40e26}
.v-neutral{background:#eaeef2;color:#424a53}.v-missing{background:#fff8c5;color:#7d4e00}
.v-own{background:repeating-linear-gradient(45deg,#f6f8fa,#f6f8fa 4px,#fff 4px,#fff 8px);
color:#8c959f}
.group{border:1px solid var(--line);border-left:6px solid var(--neutral);border-radius:6px;
padding:.6rem .8rem;margin:.5rem 0;break-inside:avoid}
.group.confirmed{border-left-color:var(--agree)}.group.contested{border-left-color:#bf8700}
.group.disputed{border-left-color:var(--dispute)}
.group ul{margin:.3rem 0 .2rem 1.1rem;padding:0}.group .claim{font-weight:600}
.counts{font-size:.85rem;color:#57606a}
.synthesis{border:1px solid var(--line);border-radius:8px;padding:.3rem 1rem}
pre,code{background:#f6f8fa;font-size:.85em}pre{padding:.5rem;overflow:auto;
white-space:pre-wrap}
.legend span{margin-right:.6rem}
@media print{body{padding:0;font-size:11pt}.banner,.badge,.v-agree,.v-dispute,.v-neutral,
.v-missing,.v-own{-webkit-print-color-adjust:exact;print-color-adjust:exact}
a{color:inherit;text-decoration:none}h2{break-after:avoid}.card,.group{break-inside:avoid}}
"""


def _e(value: Any) -> str:
    return escape("" if value is None else str(value))


def _badge(severity: str) -> str:
    return f'<span class="badge {_e(severity)}">{_e(severity)}</span>'


def _running(doc: dict[str, Any]) -> str:
    """A council still at work: where it is (each stage so far, the one at work included,
    with its legs and what they were billed), in place of a verdict it has not reached."""
    stages = [s for s in doc.get("stages") or [] if isinstance(s, dict)]
    at = next((s["name"] for s in stages if s.get("status") == "running"), None)
    cost = "unknown" if doc.get("cost_usd") is None else f"${doc['cost_usd']:.4f}"
    out = [f'<section class="banner running" id="verdict"><div class="big">Running'
           f'{": " + _e(at) if at else ""}</div><p>run {_e(doc["run_id"])} · '
           f'{len(stages)} stage(s) so far · {_e(cost)} billed so far</p></section>',
           '<h2 id="stages">Stages</h2><table id="stage-table"><tr><th>stage</th>'
           "<th>status</th><th>legs</th><th>cost</th></tr>"]
    for s in stages:
        paid = "unknown" if s.get("cost_usd") is None else f"${s['cost_usd']:.4f}"
        out.append(f'<tr class="stage" data-stage="{_e(s.get("name"))}"><td>{_e(s.get("name"))}'
                   f'</td><td class="status">{_e(s.get("status"))}</td>'
                   f'<td class="num">{len(s.get("legs") or [])}</td>'
                   f'<td class="num">{_e(paid)}</td></tr>')
    out.append("</table>")
    return "".join(out)


def _banner(doc: dict[str, Any]) -> str:
    if doc.get("status") == "running":
        return _running(doc)
    verdict = doc.get("verdict")
    chair = (doc.get("chair") or {}).get("model")
    tiers = doc.get("tiers") or {}
    big = f"Verdict: {verdict}" if verdict else "No verdict"
    who = f"chair {chair}" if chair else f"status {doc['status']}"
    counts = " · ".join(f"{tiers.get(t, 0)} {t}" for t in TIERS) if tiers else ""
    return (f'<section class="banner {_e(verdict or "none")}" id="verdict">'
            f'<div class="big">{_e(big)}</div><p>{_e(who)} · run {_e(doc["run_id"])} · '
            f'{_e(doc["status"])}</p>' + (f"<p>{_e(counts)}</p>" if counts else "")
            + "</section>")


def _cards(doc: dict[str, Any]) -> str:
    out = ['<h2 id="seats">Seats</h2><div class="cards">']
    for n, s in enumerate(doc["seats"], start=1):
        lost = s["status"] != "reviewed"
        out.append(f'<div class="card{" lost" if lost else ""}"><h3>{_e(s["model"])}</h3>')
        out.append(f'<div class="muted">{_e(s.get("label") or "no label")}</div>')
        if s["status"] == "reviewing":  # the run is still at work on it
            paid = "" if s.get("cost_usd") is None else f", ${s['cost_usd']:.4f} so far"
            out.append(f"<p>reviewing — {_e(s.get('reason'))}{_e(paid)}</p></div>")
            continue
        if lost:
            out.append(f"<p>did not review — {_e(s.get('reason'))}</p></div>")
            continue
        badges = "".join(_badge(k) + f"{s['findings'].get(k, 0)} " for k in SEVERITIES)
        cred = ("unranked" if s.get("street_cred") is None
                else f"{s['street_cred']:.2f}")
        block = ('<span class="tag good">conformed</span>' if s.get("conformed")
                 else '<span class="tag bad">non-conforming</span>')
        marks = block + ('<span class="tag bad">CUT</span>' if s.get("cut") else "") + (
            '<span class="tag">retried</span>' if s.get("retried") else "")
        base = f"reviews/{n}-{slug(s['model'])}"
        links = "" if not _written(doc, f"{base}.md") else (
            f'<p><a href="{_e(base)}.md">review</a> · <a href="{_e(base)}.json">as read</a></p>')
        out.append(f"<p>{badges}</p><p>{s['raised']} raised · {s.get('confirmed', 0)} "
                   f"confirmed · street-cred <b>{_e(cred)}</b></p><p>{marks}</p>{links}</div>")
    out.append("</div><p class=\"muted\">Street-cred: 0..1 from the peers' rankings, 1 = "
               "ranked first by every peer.</p>")
    return "".join(out)


def _matrix(doc: dict[str, Any], tally: dict[str, Any]) -> str:
    columns = [(g, fid) for g in tally["groups"] for fid in g["findings"]]
    author = {fid: seat for g in tally["groups"]
              for fid, seat in zip(g["findings"], g["seats"], strict=True)}
    out = ['<h2 id="votes">Votes</h2><p class="legend"><span class="v-agree">agree</span>'
           '<span class="v-dispute">dispute</span><span class="v-neutral">neutral</span>'
           '<span class="v-missing">no vote (neutral)</span><span class="v-own">own group'
           "</span></p>", '<table class="matrix"><tr><th>judge \\ finding</th>']
    out += [f'<th title="{_e(g["claim"])}">{_e(fid)}<br><span class="muted">{_e(g["tier"])}'
            "</span></th>" for g, fid in columns]
    out.append("</tr>")
    for j in doc.get("judges") or []:
        judge = j["judge"]
        out.append(f"<tr><th>{_e(judge)}</th>")
        for g, fid in columns:
            vote = next((v["vote"] for v in g["votes"]
                         if v["judge"] == judge and v["finding"] == fid), None)
            if author.get(fid) == judge:
                cls, text = "v-own", "own"
            elif judge in g["seats"]:
                cls, text = "v-own", "co-author"
            elif not j.get("usable"):
                cls, text = "v-own", "—"
            elif vote:
                cls, text = f"v-{vote}", vote
            else:
                cls, text = "v-missing", "no vote"
            out.append(f'<td class="{cls}">{_e(text)}</td>')
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def _groups(tally: dict[str, Any]) -> str:
    out = ['<h2 id="findings">Findings by tier</h2>', f'<p class="line">{_e(CONCURRENCE_LINE)}'
           "</p>"]
    for t in TIERS:
        groups = [g for g in tally["groups"] if g["tier"] == t]
        if not groups:
            continue
        out.append(f"<h3>{_e(t.capitalize())} ({len(groups)})</h3>")
        for g in groups:
            c = g["counts"]
            out.append(f'<div class="group {_e(t)}" id="{_e(g["id"])}">{_badge(g["severity"])}'
                       f'<span class="muted">{_e(g["location"] or "no location")} · '
                       f'{_e(", ".join(g["findings"]))}</span><ul>')
            for m in g.get("claims") or [{"finding": g["findings"][0], "seat": g["seats"][0],
                                          "claim": g["claim"], "severity": g["severity"]}]:
                out.append(f'<li><span class="claim">{_e(m["claim"])}</span> '
                           f'<span class="muted">— {_e(m["finding"])}, {_e(m["seat"])}'
                           f'{", " + _e(m["severity"]) if m.get("severity") else ""}</span></li>')
            out.append(f'</ul><div class="counts">agree {c["agree"]} · dispute {c["dispute"]} '
                       f'· neutral {c["neutral"]} of {c["judges"]} eligible judges'
                       f'{" (" + str(c["missing"]) + " without a vote)" if c.get("missing") else ""}'
                       "</div></div>")
    return "".join(out)


def _dissent(tally: dict[str, Any]) -> str:
    rows = dissent(tally)
    if not rows:
        return ""
    out = ['<h2 id="dissent">Dissent</h2><table><tr><th>Finding</th><th>Tier</th>'
           "<th>Judge</th><th>Vote</th><th>Reason</th></tr>"]
    out += [f'<tr><td>{_e(d["finding"])}</td><td>{_e(d["tier"])}</td><td>{_e(d["judge"])}</td>'
            f'<td class="v-{_e(d["vote"])}">{_e(d["vote"])}</td>'
            f'<td>{_e(d["reason"] or "(no reason given)")}</td></tr>' for d in rows]
    out.append("</table>")
    return "".join(out)


def _chair(doc: dict[str, Any], synthesis: str | None) -> str:
    from markdown_it import MarkdownIt

    out = ['<h2 id="chair">Chair</h2><ul>']
    for a in doc.get("chair_attempts") or []:
        out.append(f"<li>attempt {a['attempt']} · {_e(a['role'])} · {_e(a['model'])} · "
                   f"{_e(a['status'])}" + (f" · verdict {_e(a['verdict'])}" if a.get("verdict")
                                           else "")
                   + (f" — {_e(a['reason'])}" if a.get("reason") else "") + "</li>")
    out.append("</ul>")
    if synthesis:
        body = MarkdownIt("commonmark", {"html": False}).render(synthesis)
        out.append(f'<div class="synthesis">{body}</div>')
    return "".join(out)


FILES = ("chair-packet.md", "tally.json", "verdict.json", "run.json", "report.md", "bundle.md",
         "briefing.md")


def _written(doc: dict[str, Any], name: str) -> bool:
    """Whether the run wrote ``name`` (a run.json without ``artifacts``: assumed written)."""
    written = doc.get("artifacts")
    return not isinstance(written, list) or name in written


def _files(doc: dict[str, Any]) -> list[str]:
    """The run's files the report links to: those it says it wrote (``artifacts``; a run
    still going has written only some), and ``report.md`` once it ends (written beside this
    report, after run.json's list was made)."""
    written = doc.get("artifacts")
    if not isinstance(written, list):
        return list(FILES)
    done = doc.get("status") != "running"
    return [f for f in FILES if f in written or (done and f == "report.md")]


def report_html(doc: dict[str, Any], tally: dict[str, Any] | None,
                synthesis: str | None) -> str:
    parts = [_banner(doc), f'<p class="line">{_e(CONCURRENCE_LINE)}</p>', _cards(doc)]
    if tally:
        parts += [_matrix(doc, tally), _groups(tally), _dissent(tally)]
    parts.append(_chair(doc, synthesis))
    if doc.get("notices"):
        parts.append('<h2 id="notices">Notices</h2><ul>'
                     + "".join(f"<li>{_e(n)}</li>" for n in doc["notices"]) + "</ul>")
    u = doc["usage"]
    cost = "unknown" if doc.get("cost_usd") is None else f"${doc['cost_usd']:.4f}"
    parts.append(f'<h2 id="files">Files</h2><p>{doc["requests"]} requests · '
                 f'{u["input_tokens"]:,} in + {u["output_tokens"]:,} out tokens · {_e(cost)}'
                 f'{"" if doc.get("cost_exact", True) else " (a floor)"}</p><p>'
                 + " · ".join(f'<a href="{f}">{f}</a>' for f in _files(doc)) + "</p>")
    title = f"Council review {doc['run_id']}"
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{STYLE}</style></head>\n<body>\n"
            f"<h1>{_e(title)}</h1>\n" + "\n".join(parts) + "\n</body></html>\n")
