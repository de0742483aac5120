"""``orch ui`` end to end: the real command as a child process over the records of scripted
runs, spoken to over HTTP for the guard (token, Host, methods, loopback) and through a real
headless Chromium for the pages (statuses and costs, a live leg turning complete without a
reload, the council's vote matrix, the spend total, hostile model text left inert)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_council_trust import bench as council_bench  # noqa: F401 - a fixture
from ui_browser import Chromium, OrchUI

from orchestrator.testing.scripted_server import Reply

HOSTILE = ("Here is my answer.\n\n<script>window.pwned = 1</script>\n\n"
           '<img src="x" onerror="window.pwned = 2">\n\n'
           "[click me](javascript:window.pwned=3) and [data](data:text/html,<script>1</script>)"
           "\n\n**bold stays**\n")
PRICES = {"input_cost_per_mtok": 3.0, "output_cost_per_mtok": 15.0}


@pytest.fixture
def waves(orch, scripted_server):
    """Two waves: three legs (one markdown answer, one hostile, one refused by the server),
    and one more, so the runs page lists two."""
    orch.provider(**PRICES)
    scripted_server.script("alpha", Reply(text="# Plan\n\n- one\n- two\n",
                                          usage={"prompt_tokens": 1200, "completion_tokens": 300}))
    scripted_server.script("bravo", Reply(text=HOSTILE))
    scripted_server.script("charlie", Reply(status=400, error_message="model charlie refuses"))
    first = orch.run_wave(["alpha", "bravo", "charlie"],
                          "Plan it. <script>window.pwned = 4</script>")
    scripted_server.script("alpha", Reply(text="again"))
    second = orch.run_wave(["alpha"], "Once more.")
    return first, second


@pytest.fixture
def ui():
    server = OrchUI()
    yield server
    server.stop()


@pytest.fixture
def browser(tmp_path):
    chrome = Chromium(tmp_path / "chromium-profile")
    yield chrome
    chrome.close()


def get(ui: OrchUI, path: str, *, cookie: str | None = None, host: str | None = None,
        method: str = "GET") -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", ui.port, timeout=10)
    headers = {"Host": f"127.0.0.1:{ui.port}" if host is None else host}
    if cookie is not None:
        headers["Cookie"] = cookie
    conn.request(method, path, headers=headers)
    resp = conn.getresponse()
    resp.body = resp.read()
    conn.close()
    return resp


def routes(wave_id: str) -> list[str]:
    return ["/", "/?status=complete", "/spend", "/spend?since=all&by=user", "/spend/chart.svg",
            f"/wave/{wave_id}", f"/wave/{wave_id}/legs.json", "/static/ui.css",
            "/static/ui.js", "/static/council.css", "/council/x/", "/council/x/run.json",
            "/bench/x", "/bench/x/chart/0.svg", "/search?q=plan", "/no/such/page",
            "/../../etc/passwd"]


def test_no_token_is_403_on_every_route(waves, ui):
    wave_id = waves[0].doc["wave_id"]
    good = f"orch_ui_{ui.port}={ui.token}"
    for path in routes(wave_id):
        for cookie in (None, f"orch_ui_{ui.port}=", f"orch_ui_{ui.port}={ui.token[:-1]}x",
                       f"orch_ui={ui.token}", f"orch_ui_{ui.port + 1}={ui.token}", f"other={ui.token}",
                       "garbage;;=="):
            resp = get(ui, path, cookie=cookie)
            assert resp.status == 403, (path, cookie, resp.status)
            assert ui.token.encode() not in resp.body
        assert get(ui, path + ("&" if "?" in path else "?") + "token=wrong").status == 403
        assert get(ui, path, cookie=good).status in (200, 404), path
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
        assert get(ui, "/", method=method).status == 403
        assert get(ui, "/", method=method, cookie=good).status == 405


def test_the_token_url_sets_a_strict_httponly_cookie_and_drops_the_token(ui):
    resp = get(ui, f"/spend?since=all&token={ui.token}")
    assert resp.status == 303
    assert resp.getheader("Location") == "/spend?since=all"
    cookie = resp.getheader("Set-Cookie")
    assert cookie.startswith(f"orch_ui_{ui.port}={ui.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie


def test_a_wrong_host_is_403_and_no_response_carries_cors(waves, ui):
    good = f"orch_ui_{ui.port}={ui.token}"
    for host in ("evil.example", f"evil.example:{ui.port}", f"127.0.0.1:{ui.port + 1}",
                 f"localhost.evil.example:{ui.port}", "127.0.0.1", "", f"[::1]:{ui.port}"):
        assert get(ui, "/", cookie=good, host=host).status == 403, host
        assert get(ui, f"/?token={ui.token}", host=host).status == 403, host
    for host in (f"127.0.0.1:{ui.port}", f"localhost:{ui.port}"):
        resp = get(ui, "/", cookie=good, host=host)
        assert resp.status == 200
        assert not [h for h, _ in resp.getheaders() if h.lower().startswith("access-control")]
        csp = resp.getheader("Content-Security-Policy")
        assert "default-src 'self'" in csp and "'unsafe-inline'" not in csp


def test_the_server_listens_on_loopback_only(ui):
    if not Path("/proc/net/tcp").exists():
        pytest.skip("no /proc/net/tcp here: the listening address cannot be read")
    listening = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, port = local.split(":")
        if state == "0A" and int(port, 16) == ui.port:
            listening.append(address)
    assert listening == ["0100007F"]  # 127.0.0.1, little-endian
    v6 = Path("/proc/net/tcp6")
    if v6.exists():
        assert not [ln for ln in v6.read_text().splitlines()[1:]
                    if ln.split()[3] == "0A" and int(ln.split()[1].split(":")[1], 16) == ui.port]
    # bound to 127.0.0.1, not 0.0.0.0: no other interface of the machine takes a connection
    # (checked from the kernel's table; no packet is sent to a non-loopback address)


def test_the_wave_page_shows_every_legs_status_and_cost(waves, ui, browser, tmp_path):
    doc = waves[0].doc
    browser.open(ui.url.replace("/?", f"/wave/{doc['wave_id']}?"))
    rows = browser.eval("""[...document.querySelectorAll('tr.leg')].map(r => ({
        leg: r.dataset.leg, status: r.querySelector('[data-field=status]').textContent,
        cost: r.querySelector('[data-field=cost]').textContent}))""")
    assert [(r["leg"], r["status"]) for r in rows] == [
        (leg["leg_id"], leg["status"]) for leg in doc["legs"]]
    assert [r["status"] for r in rows] == ["complete", "complete", "error"]
    from orchestrator.ui.render import money

    assert [r["cost"] for r in rows] == [money(leg["cost_usd"]) for leg in doc["legs"]]
    assert doc["legs"][0]["cost_usd"] > 0 and rows[0]["cost"] != "$0.0000"
    assert browser.eval("document.querySelector('#answer-' + CSS.escape("
                        f"{json.dumps(doc['legs'][0]['leg_id'])}) + ' h1').textContent") == "Plan"
    assert browser.eval("location.search") == ""  # the token left the address bar
    assert "Plan it." in browser.eval("document.querySelector('#briefing pre').textContent")
    assert browser.eval("[...document.querySelectorAll('tr.leg [data-field=steps]')]"
                        ".map(td => td.textContent)") == [str(leg["steps"]) for leg in doc["legs"]]
    browser.screenshot(tmp_path / "wave.png")
    # the runs page lists both waves, newest first, with their cost
    browser.open(f"{ui.base}/")
    ids = browser.eval("[...document.querySelectorAll('tr.run td:first-child')]"
                       ".map(td => td.textContent)")
    assert ids == [waves[1].doc["wave_id"], doc["wave_id"]]
    browser.screenshot(tmp_path / "runs.png")


def test_model_text_renders_inert(waves, ui, browser):
    doc = waves[0].doc
    bravo = doc["legs"][1]
    assert "<script>" in bravo["answer"]
    browser.open(ui.url.replace("/?", f"/wave/{doc['wave_id']}?"))
    assert browser.eval("typeof window.pwned") == "undefined"
    assert browser.eval("document.scripts.length") == 0  # a finished wave runs no script at all
    assert browser.eval("document.querySelectorAll('[onerror], iframe, object, embed').length") == 0
    hrefs = browser.eval("[...document.querySelectorAll('a')].map(a => a.getAttribute('href'))")
    assert not [h for h in hrefs if h and h.lower().startswith(("javascript:", "data:"))]
    text = browser.eval("document.getElementById('answer-' + "
                        f"{json.dumps(bravo['leg_id'])}).textContent")
    assert "<script>window.pwned = 1</script>" in text and "onerror" in text
    assert browser.eval("document.querySelectorAll('.answer strong').length") >= 1
    # a click on what was a javascript: link runs nothing either
    browser.eval("[...document.querySelectorAll('.answer a')].forEach(a => a.click())")
    assert browser.eval("typeof window.pwned") == "undefined"


def _released_reply(gate: threading.Event):
    def reply(body, n):
        gate.wait(60)
        return Reply(text="finally done", usage={"prompt_tokens": 100, "completion_tokens": 10})
    return reply


def test_a_live_wave_turns_a_leg_complete_without_a_reload(orch, scripted_server, ui, browser,
                                                           tmp_path):
    orch.provider(**PRICES)
    gate = threading.Event()
    scripted_server.script("quick", Reply(text="quick answer"))
    scripted_server.script("slow", _released_reply(gate))
    orch_bin = Path(sys.executable).with_name("orch")
    fanout = subprocess.Popen([str(orch_bin), "fanout", "-p", "Go.", "-m",
                               "scripted/quick,scripted/slow", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=os.environ.copy())
    try:
        runs = orch.home / "runs"
        wave_id = None
        for _ in range(300):
            found = [p.name for p in runs.glob("*/wave.json")] if runs.exists() else []
            legs = list(runs.glob("*-2/metadata.json")) if runs.exists() else []
            if found and legs:
                wave_id = next(p.parent.name for p in runs.glob("*/wave.json"))
                break
            threading.Event().wait(0.1)
        assert wave_id, "the wave never started"
        browser.open(ui.url.replace("/?", f"/wave/{wave_id}?"))
        assert browser.eval("document.getElementById('wave').dataset.live") == "yes"
        browser.eval("window.sameDocument = 'yes'")
        slow = "document.querySelector('tr.leg:nth-of-type(3) [data-field=status]')"
        assert browser.eval(f"{slow}.textContent") in ("running", "pending")
        gate.set()
        browser.wait_for(f"{slow}.textContent === 'complete'", timeout=30)
        assert browser.eval("window.sameDocument") == "yes"  # no reload happened
        browser.wait_for("document.getElementById('wave-status').textContent !== 'running'")
        assert "finally done" in browser.eval("document.body.textContent")
        assert browser.eval("[...document.querySelectorAll('[data-status-of]')]"
                            ".map(s => s.textContent)") == ["complete", "complete"]
        assert browser.eval("document.getElementById('wave-tokens').textContent") != \
            "0 in / 0 out"
        browser.screenshot(tmp_path / "live.png")
    finally:
        gate.set()
        out, err = fanout.communicate(timeout=60)
    assert fanout.returncode == 0, err


def test_the_council_page_shows_the_vote_matrix(council_bench, ui, browser, tmp_path):  # noqa: F811
    result, doc, run_dir = council_bench
    browser.open(ui.url.replace("/?", f"/council/{doc['run_id']}/?"))
    rows = browser.eval("""[...document.querySelectorAll('table.matrix tr')].map(
        tr => [...tr.children].map(c => c.textContent.trim()))""")
    head, *judges = rows
    assert [r[0] for r in judges] == ["scripted/alpha", "scripted/bravo", "text/charlie"]
    assert sorted(judges[1][1:]) == ["agree", "co-author", "dispute", "no vote", "own", "own"]
    tally = json.loads((run_dir / "tally.json").read_text())
    votes = [v["vote"] for g in tally["groups"] for v in g["votes"]]
    cells = [c for r in judges for c in r[1:]]
    for vote in ("agree", "dispute"):
        assert cells.count(vote) == votes.count(vote), vote
    assert browser.eval("document.querySelector('#verdict .big').textContent") == (
        f"Verdict: {doc['verdict']}")
    # the report's links open the council's own files, as text
    href = browser.eval("document.querySelector('.card a').getAttribute('href')")
    browser.open(f"{ui.base}/council/{doc['run_id']}/{href}")
    assert browser.eval("document.contentType") == "text/plain"
    browser.open(f"{ui.base}/council/{doc['run_id']}/")
    browser.screenshot(tmp_path / "council.png")


def test_the_spend_page_total_equals_orch_spend_json(waves, ui, browser, tmp_path):
    orch_bin = Path(sys.executable).with_name("orch")
    spend = json.loads(subprocess.run([str(orch_bin), "spend", "--since", "all", "--json",
                                       "--group-by", "model"], capture_output=True, text=True,
                                      check=True).stdout)
    assert spend["total_cost_usd"] > 0
    browser.open(ui.url.replace("/?", "/spend?since=all&by=model&"))
    assert float(browser.eval("document.getElementById('total').dataset.usd")) == \
        spend["total_cost_usd"]
    assert browser.eval("document.getElementById('legs').textContent") == f"{spend['legs']:,}"
    keys = browser.eval("[...document.querySelectorAll('#groups tr td:first-child')]"
                        ".map(td => td.textContent)")
    assert keys == [g["key"] for g in spend["groups"]]
    assert browser.eval("document.getElementById('chart').naturalWidth") == 900  # it loaded
    browser.screenshot(tmp_path / "spend.png")


def test_the_bench_page_shows_tables_charts_and_each_trial(orch, scripted_server, tmp_path,
                                                           monkeypatch, ui, browser):
    from click.testing import CliRunner
    from test_bench_e2e import answer, write_cases

    from orchestrator.cli import cli
    from orchestrator.testing.sandbox import unsafe_unless_confined

    orch.provider(**PRICES)
    tasks = {f"t{i}" for i in range(1, 9)}
    scripted_server.script("right", answer(tasks))
    scripted_server.script("half", answer({"t1", "t2", "t3", "t4"}))
    write_cases(tmp_path / "cases")
    (tmp_path / "bench.toml").write_text(
        '[bench]\ncases = "cases"\ntrials = 1\njobs = 8\n\n'
        '[[contestants]]\nname = "right"\nmodel = "scripted/right"\n\n'
        '[[contestants]]\nname = "half"\nmodel = "scripted/half"\n')
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["bench", "--config", str(tmp_path / "bench.toml"), "--yes",
                                      "--json", *unsafe_unless_confined()])
    doc = json.loads(result.stdout)
    browser.open(ui.url)
    href = browser.eval("[...document.querySelectorAll('tr.run a')].map(a => "
                        "a.getAttribute('href')).find(h => h.startsWith('/bench/'))")
    assert href == f"/bench/{doc['bench_id']}"
    browser.open(ui.base + href)
    first = browser.eval("[...document.querySelector('table.bench-table').rows].slice(1)"
                         ".map(r => r.cells[0].textContent)")
    assert first == [r["contestant"] for r in doc["stats"]["rows"]]
    trials = [t for t in doc["trials"]]
    assert browser.eval("document.querySelectorAll('details.trial').length") == len(trials)
    text = browser.eval("document.body.textContent")
    assert "The code is CODE-t1." in text and "I do not know." in text
    from orchestrator.bakeoff import charts

    if charts.available():
        browser.wait_for("[...document.querySelectorAll('img.chart')].every("
                         "i => i.complete && i.naturalWidth > 0)")
        assert browser.eval("document.querySelectorAll('img.chart').length") == 3
    browser.eval("document.querySelectorAll('details.trial')[0].open = true")
    browser.screenshot(tmp_path / "bench.png")


def test_bad_ports_are_one_line_errors(orch_home):
    orch_bin = str(Path(sys.executable).with_name("orch"))
    bad = subprocess.run([orch_bin, "ui", "--no-open", "--port", "70000"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "--port" in bad.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = subprocess.run([orch_bin, "ui", "--no-open", "--port", str(port)],
                              capture_output=True, text=True, timeout=60)
    assert busy.returncode == 1
    assert busy.stderr.startswith(f"orch: error: cannot listen on 127.0.0.1:{port}")
    assert "Traceback" not in busy.stderr and len(busy.stderr.strip().splitlines()) == 1


def test_the_runs_page_pages_and_sees_a_new_run(waves, orch, scripted_server, monkeypatch):
    """The listing is kept between visits (10,000 runs take a second to read) but a new run
    shows at once; a long list is cut into pages."""
    import re as re_mod

    from orchestrator.ui import views
    from orchestrator.ui.server import UIServer

    monkeypatch.setattr(views, "PAGE", 1)
    server = UIServer(views.View(orch.home / "runs", orch.home / "bench"))
    server.start()
    try:
        at = SimpleNamespace(port=server.port)
        cookie = f"orch_ui_{server.port}={server.token}"

        def ids(path: str) -> list[str]:
            body = get(at, path, cookie=cookie).body.decode()
            return re_mod.findall(r'<tr class="run"><td><a href="/wave/([^"]+)"', body)

        first, second = waves[0].doc["wave_id"], waves[1].doc["wave_id"]
        assert ids("/") == [second]
        assert 'id="older" href="/?page=2"' in get(at, "/", cookie=cookie).body.decode()
        assert ids("/?page=2") == [first]
        assert get(at, "/?page=x", cookie=cookie).status == 400
        scripted_server.script("alpha", Reply(text="third"))
        third = orch.run_wave(["alpha"], "Third.").doc["wave_id"]
        assert ids("/") == [third]
    finally:
        server.shutdown()
        server.server_close()


def test_spend_series_and_groups_agree_with_the_rollup_on_both_backends(ledger_url):
    """The chart's day-by-group series and the provider grouping add up to ``orch spend``'s
    rollup, on SQLite and PostgreSQL; a row of unknown cost stays out of the dollars."""
    from datetime import UTC, datetime, timedelta

    from orchestrator.ledger.spend import Ledger
    from orchestrator.ledger.spend_series import daily
    from orchestrator.ui import spend as spend_mod

    ledger = Ledger()
    now = datetime.now(UTC)
    rows = [{"wave_id": f"w{i}", "leg_id": f"w{i}-1", "kind": "leg",
             "model": ("openai/a", "openai/b", "anthropic/c", "bare")[i % 4],
             "provider": "x", "status": "complete" if i % 3 else "error",
             "user": f"u{i % 2}", "cost_usd": None if i == 5 else 0.25 * (i % 4 + 1),
             "cost_source": "unknown" if i == 5 else "priced",
             "ts": now - timedelta(days=i % 3, minutes=i)} for i in range(12)]
    ledger.append_many(rows)
    total = ledger.rollup(None, None)["total_cost_usd"]
    for by in ("model", "provider", "user", "kind"):
        data = spend_mod.rollup(None, by)
        assert data["total_cost_usd"] == total
        assert round(sum(g["cost_usd"] for g in data["groups"]), 8) == round(total, 8)
        series = daily(ledger, None, by)
        assert round(sum(c["cost_usd"] for c in series), 8) == round(total, 8)
        assert len({c["day"] for c in series}) == 3
    providers = {g["key"]: g for g in spend_mod.rollup(None, "provider")["groups"]}
    assert set(providers) == {"openai", "anthropic", "bare"}
    assert providers["openai"]["legs"] == 6 and providers["openai"]["unknown_cost_legs"] == 1
    with pytest.raises(ValueError, match="cannot chart spend by 'day'"):
        daily(ledger, None, "day")


def test_broken_records_answer_a_line_and_the_server_stays_up(orch_home, ui):
    """A wave.json that is not JSON, a council whose run.json is a list, a bench file that is
    not an object: each page says so in one line; the runs page lists them unreadable."""
    runs = orch_home / "runs"
    (runs / "20260101-000000-bad").mkdir(parents=True)
    (runs / "20260101-000000-bad" / "wave.json").write_text("{not json")
    (runs / "council-20260101-000000-x").mkdir()
    (runs / "council-20260101-000000-x" / "run.json").write_text("[1, 2]")
    (orch_home / "bench").mkdir()
    (orch_home / "bench" / "bench-20260101-000000-y.json").write_text('"a string"')
    good = f"orch_ui_{ui.port}={ui.token}"
    body = get(ui, "/", cookie=good).body.decode()
    assert body.count("unreadable") >= 2
    for path in ("/wave/20260101-000000-bad", "/council/20260101-000000-x/",
                 "/bench/bench-20260101-000000-y", "/wave/..%2F..%2Fetc", "/council/x/../run.json"):
        resp = get(ui, path, cookie=good)
        assert resp.status in (404, 500), path
        assert len(resp.body.decode().strip().splitlines()) == 1, path
        assert b"Traceback" not in resp.body
    assert get(ui, "/", cookie=good).status == 200
    # a kind this view has no page for yet (a future one, say) is listed without a link
    (runs / "debate-20260101-000000-z").mkdir()
    (runs / "debate-20260101-000000-z" / "run.json").write_text(json.dumps(
        {"run_id": "20260101-000000-z", "kind": "debate", "status": "complete"}))
    body = get(ui, "/", cookie=good).body.decode()
    assert "<td>20260101-000000-z</td>" in body and "/debate/" not in body
    (runs / "debate-20260101-000000-z" / "run.json").unlink()
    (runs / "debate-20260101-000000-z").rmdir()
    # the same listing from the CLI: no internal error on a run.json that is not an object
    listed = subprocess.run([str(Path(sys.executable).with_name("orch")), "runs", "--json"],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert sorted(r["status"] for r in json.loads(listed.stdout)["runs"]) == ["unreadable"] * 3


def test_a_running_council_page_refreshes_itself(council_bench, ui):  # noqa: F811
    from orchestrator.pids import process_started

    _, doc, run_dir = council_bench
    good = f"orch_ui_{ui.port}={ui.token}"
    page = get(ui, f"/council/{doc['run_id']}/", cookie=good).body.decode()
    assert 'http-equiv="refresh"' not in page  # finished: still
    running = {**json.loads((run_dir / "run.json").read_text()), "status": "running",
               "pid": os.getpid(), "pid_started": process_started(os.getpid())}
    (run_dir / "run.json").write_text(json.dumps(running))
    page = get(ui, f"/council/{doc['run_id']}/", cookie=good).body.decode()
    assert '<meta http-equiv="refresh" content="3">' in page


def test_orch_help_does_not_load_the_web_view():
    """``orch --help`` stays fast: the ui command's module, and the web view with its
    templates, load only when ``orch ui`` runs."""
    code = ("import sys\nfrom orchestrator.cli import main\nsys.argv = ['orch', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "loaded = [m for m in sys.modules if m.startswith(('orchestrator.ui', 'jinja2',"
            " 'orchestrator.cli.ui', 'litellm'))]\nprint('LOADED', loaded)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60).stdout
    assert "ui " in out and "LOADED []" in out, out[-500:]


def test_the_runs_summaries_are_read_once_and_follow_each_record(waves, orch, monkeypatch):
    """A second view (a new process) finds every run's summary on disk and reads no record;
    a record that changed is read again; filters still see every run, not only a page."""
    import re as re_mod

    from orchestrator.ui import views
    from orchestrator.ui.server import UIServer

    monkeypatch.setattr(views, "PAGE", 1)
    runs, cache = orch.home / "runs", orch.home / "cache"
    first, second = waves[0].doc["wave_id"], waves[1].doc["wave_id"]

    def serve():
        server = UIServer(views.View(runs, orch.home / "bench", cache))
        server.start()
        return server, SimpleNamespace(port=server.port), f"orch_ui_{server.port}={server.token}"

    def ids(at, cookie, path: str) -> list[str]:
        body = get(at, path, cookie=cookie).body.decode()
        return re_mod.findall(r'<tr class="run"><td><a href="/wave/([^"]+)"', body)

    server, at, cookie = serve()
    try:
        assert ids(at, cookie, "/") == [second]
        assert server.router.index.read == 2  # nothing summarised yet: both read
        assert ids(at, cookie, "/") == [second] and server.router.index.read == 2
        server.router.index.flush()
    finally:
        server.shutdown()
        server.server_close()
    server, at, cookie = serve()
    try:
        assert ids(at, cookie, "/") == [second]
        assert server.router.index.read == 0  # a new view: every summary from disk
        # a filter over every run, not the page: the older wave's legs partly failed
        assert ids(at, cookie, f"/?status={waves[0].doc['status']}") == [first]
        assert ids(at, cookie, "/?kind=council") == []
        # a record rewritten (as --retry-failed or a repair does) is read again
        path = runs / second / "wave.json"
        doc = json.loads(path.read_text())
        path.write_text(json.dumps({**doc, "status": "error", "tag": "rewritten"}))
        assert ids(at, cookie, "/?status=error") == [second]
        assert server.router.index.read == 1
        # a run removed (orch runs gc: its folder and its legs') is gone from the list
        import shutil

        for folder in runs.glob(f"{first}*"):
            shutil.rmtree(folder)
        assert ids(at, cookie, "/?page=2") == []
    finally:
        server.shutdown()
        server.server_close()


def test_the_search_box_finds_runs_by_their_text_and_marks_the_words_inert(waves, ui, browser,
                                                                           orch_home):
    """The runs page's search box, typed into and submitted in Chromium: the wave whose
    prompt and hostile answer hold the word is found (the same search as `orch runs
    search`), linked, each match marked, and nothing in the model's text runs."""
    doc = waves[0].doc
    browser.open(ui.url)
    browser.eval("document.querySelector('#search-box input').value = 'pwned';"
                 "document.querySelector('#search-box').submit()")
    browser.wait_for("document.querySelector('#summary') !== null")
    assert browser.eval("location.pathname + location.search") == "/search?q=pwned"
    links = browser.eval("[...document.querySelectorAll('a.run-id')]"
                         ".map(a => [a.textContent, a.getAttribute('href')])")
    assert links == [[doc["wave_id"], f"/wave/{doc['wave_id']}"]]
    marks = browser.eval("[...document.querySelectorAll('li.hit mark')].map(m => m.textContent)")
    assert marks and {m.lower() for m in marks} == {"pwned"}
    fields = browser.eval("[...document.querySelectorAll('li.hit')].map(li => li.textContent)")
    assert any("scripted/bravo answer:" in f for f in fields), fields
    assert browser.eval("typeof window.pwned") == "undefined"
    assert browser.eval("document.scripts.length") == 0
    # the search's own refusals are one line, as on the command line; no words: the form
    from orchestrator.ui.views import View

    view = View(orch_home / "runs", cache_dir=orch_home / "ui-cache")
    bad = view("/search", {"q": ['"']})
    assert bad.status == 400 and bad.body.decode().count("\n") == 1
    assert b'id="search-form"' in view("/search", {}).body
    assert b"No runs match" in view("/search", {"q": ["no-such-word-q7"]}).body
