"""The HTTP side of ``orch ui``: the stdlib's threading server on loopback, and the guard every
request passes before a page is built.

Why the stdlib and not Starlette: the view is a handful of GET routes over files and one SQL
rollup; the base install already has what it needs (no ``gateway`` extra to run ``orch ui``),
and every header the browser sees is one this module wrote (no middleware adds CORS).

The guard, in order: the ``Host`` header must name this server (``127.0.0.1:PORT`` or
``localhost:PORT``: a DNS-rebinding page cannot reach it); the request must carry the token,
as ``?token=`` (answered with an HttpOnly, SameSite=Strict cookie and a redirect that drops
it from the address bar) or as that cookie. A GET reads. A POST (the ask page starting a
run) must also come from this origin (``Origin``, and ``Sec-Fetch-Site`` when the browser
sends it), carry the cookie (never ``?token=``) and a form token this server issued for that
form (:class:`FormTokens`: random, one action, used once); the router sees nothing before all
of that holds. Everything else is 403/405.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

LOOPBACK = "127.0.0.1"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    # no Referer to any other origin (the token never leaves in one); same-origin, because
    # with no-referrer a browser sends a form POST as `Origin: null`, which the guard refuses
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}


class Reply:
    """What a route answers: a status, a body and its type (HTML unless said)."""

    def __init__(self, body: str | bytes, status: int = 200,
                 content_type: str = "text/html; charset=utf-8",
                 location: str | None = None) -> None:
        self.body = body.encode() if isinstance(body, str) else body
        self.status = status
        self.content_type = content_type
        self.location = location  # a redirect's (303 after a form)


Router = Callable[[str, dict[str, list[str]]], Reply]
MAX_FORM = 1 << 20  # bytes of a posted form: a prompt, not a file upload


class FormTokens:
    """The per-form tokens (CSRF): a page that renders a form asks for one for the form's
    action; a POST must bring it back, to that action, once. Random, so another origin
    cannot know one; the oldest are forgotten past ``limit``."""

    def __init__(self, limit: int = 2000) -> None:
        self._held: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self.limit = limit

    def issue(self, action: str) -> str:
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._held[token] = action
            while len(self._held) > self.limit:
                self._held.popitem(last=False)
        return token

    def take(self, token: str, action: str) -> bool:
        """True once for a token issued for ``action``; it is spent either way."""
        with self._lock:
            held = self._held.pop(token, None) if token else None
        return held is not None and hmac.compare_digest(held.encode(), action.encode())


class UIServer(ThreadingHTTPServer):
    """A loopback-only server holding the token and the router."""

    daemon_threads = True

    def __init__(self, router: Router, port: int = 0, token: str | None = None) -> None:
        self.router = router
        self.token = token or secrets.token_urlsafe(32)
        super().__init__((LOOPBACK, port), _Handler)
        self.port = self.server_address[1]
        self.allowed_hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}
        self.allowed_origins = {f"http://{host}" for host in self.allowed_hosts}
        # the router's form tokens (orchestrator.ui.views.View has them): none, no POST
        self.forms: FormTokens | None = getattr(router, "forms", None)
        # one name per port: browsers keep cookies per host, not per port, so two orch ui
        # at once would otherwise overwrite each other's
        self.cookie = f"orch_ui_{self.port}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/?token={self.token}"

    def start(self) -> threading.Thread:
        """Serve in a daemon thread (tests, and ``orch serve`` later); returns it."""
        thread = threading.Thread(target=self.serve_forever, name="orch-ui", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    server: UIServer
    server_version = "orch-ui"
    sys_version = ""

    def log_message(self, format, *args) -> None:  # noqa: A002 - the stdlib's name
        return  # a URL may hold the token: never logged

    def _send(self, reply: Reply, extra: dict[str, str] | None = None) -> None:
        self.send_response(reply.status)
        for name, value in {**HEADERS, **(extra or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    def _refuse(self, status: int, why: str) -> None:
        self._send(Reply(f"{status} {why}\n", status, "text/plain; charset=utf-8"))

    def _guard(self, writes: bool = False) -> tuple[str, dict[str, list[str]]] | None:
        """The path and query of an admitted request, else None (already answered).
        ``writes``: a POST, which takes the cookie only (a ``?token=`` is refused)."""
        if self.headers.get("Host", "") not in self.server.allowed_hosts:
            self._refuse(HTTPStatus.FORBIDDEN, "forbidden: wrong Host (open the URL orch ui "
                         "printed)")
            return None
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        given = (query.pop("token", [""]) or [""])[0]
        if given and writes:
            self._refuse(HTTPStatus.FORBIDDEN, "forbidden: a form is sent with the cookie, "
                         "not ?token= (open the URL orch ui printed, then the form)")
            return None
        if given:
            if not hmac.compare_digest(given.encode(), self.server.token.encode()):
                self._refuse(HTTPStatus.FORBIDDEN, "forbidden: wrong token")
                return None
            rest = urlencode(query, doseq=True)
            self._send(Reply("", HTTPStatus.SEE_OTHER, "text/plain"), {
                "Location": parts.path + (f"?{rest}" if rest else ""),
                "Set-Cookie": f"{self.server.cookie}={self.server.token}; HttpOnly; "
                              "SameSite=Strict; "
                              "Path=/"})
            return None
        cookie = SimpleCookie()
        try:
            cookie.load(self.headers.get("Cookie", ""))
        except Exception:  # noqa: BLE001 - a malformed Cookie header is no token
            cookie = SimpleCookie()
        name = self.server.cookie
        held = cookie[name].value if name in cookie else ""
        if not held or not hmac.compare_digest(held.encode(), self.server.token.encode()):
            self._refuse(HTTPStatus.FORBIDDEN, "forbidden: no token (open the URL orch ui "
                         "printed)")
            return None
        return parts.path, query

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        admitted = self._guard()
        if admitted is None:
            return
        path, query = admitted
        try:
            reply = self.server.router(path, query)
        except Exception as exc:  # noqa: BLE001 - one bad record must not kill the server
            reply = Reply(f"500 cannot show this page: {type(exc).__name__}: {exc}\n", 500,
                          "text/plain; charset=utf-8")
        self._send(reply, {"Location": reply.location} if reply.location else None)

    def _read_only(self) -> None:
        if self._guard() is not None:
            self._send(Reply("405 read-only: orch ui serves GET here\n", 405,
                             "text/plain; charset=utf-8"), {"Allow": "GET"})

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _read_only  # noqa: N815

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        """A form that starts something: every check before the router sees a byte of it."""
        admitted = self._guard(writes=True)
        if admitted is None:
            return
        path, _ = admitted
        router, forms = self.server.router, self.server.forms
        if forms is None or not getattr(router, "accepts_post", lambda p: False)(path):
            self._send(Reply("405 read-only: orch ui serves GET here\n", 405,
                             "text/plain; charset=utf-8"), {"Allow": "GET"})
            return
        if self.headers.get("Origin", "") not in self.server.allowed_origins:
            self._refuse(HTTPStatus.FORBIDDEN, "forbidden: the form came from another origin "
                         "(or none); use the page orch ui serves")
            return
        if self.headers.get("Sec-Fetch-Site", "same-origin") != "same-origin":
            self._refuse(HTTPStatus.FORBIDDEN, "forbidden: the form came from another site")
            return
        kind = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if kind != "application/x-www-form-urlencoded":
            self._refuse(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "unsupported: send the page's form")
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_FORM:
            self._refuse(HTTPStatus.REQUEST_ENTITY_TOO_LARGE if length > MAX_FORM
                         else HTTPStatus.LENGTH_REQUIRED, "the form needs a length up to 1 MiB")
            return
        try:
            form = parse_qs(self.rfile.read(length).decode("utf-8"), keep_blank_values=True,
                            max_num_fields=1000)
        except (UnicodeDecodeError, ValueError):
            self._refuse(HTTPStatus.BAD_REQUEST, "bad request: the form is not UTF-8 form data")
            return
        token = (form.pop("form_token", [""]) or [""])[-1]
        if not forms.take(token, path):
            self._refuse(HTTPStatus.FORBIDDEN, "forbidden: the form token is missing, wrong or "
                         "used (reload the page and send the form again)")
            return
        try:
            reply = router.post(path, form)
        except Exception as exc:  # noqa: BLE001 - one bad request must not kill the server
            reply = Reply(f"500 cannot do this: {type(exc).__name__}: {exc}\n", 500,
                          "text/plain; charset=utf-8")
        self._send(reply, {"Location": reply.location} if reply.location else None)
