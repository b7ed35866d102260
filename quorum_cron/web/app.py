"""The web face: a Starlette app serving the pages, the JSON API and the live event stream.

Routes (the JSON API is documented in ``docs/web.md``)::

    GET  /                      jobs (filter ?state=failed|missed|paused)
    GET  /cluster               members, quorum health, store, recent problems
    GET  /jobs/{job}            expected-vs-actual timeline (?window=1h&to=<ms>), history (?page=N)
    GET  /jobs/{job}/slots/{ms} one slot: votes, quorum, executor and why, token, output
    GET  /audit                 operator actions
    GET  /api/...               the same as JSON; /api/events: server-sent events
    POST /jobs/{job}/{trigger|pause|resume}       from the pages (session + CSRF token)
    POST /api/jobs/{job}/{trigger|pause|resume}   for tools (Authorization: Bearer NAME:SECRET)
    GET|POST /login, POST /logout

Security model. The server is read-only unless admin tokens were given
(:mod:`.tokens`). Every mutating request is checked on the server: a page
action needs a session opened with a token (cookie ``HttpOnly``,
``SameSite=Strict``), whose token is still configured, *and* the session's
CSRF token in the form, *and* an ``Origin`` (when the browser sends one)
equal to this server's; an API action needs the token itself in the
``Authorization`` header, which browsers never attach on their own. Each
action is one store call audited with the token's name as ``by``. Everything
from Redis is escaped by the templates (Jinja2 autoescape), and the
Content-Security-Policy allows only this server's own script and style, so
even a value that slipped through could not run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import secrets
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from quorum_cron.commands.control import MAX_REASON
from quorum_cron.config import Config
from quorum_cron.durations import format_duration, parse_duration
from quorum_cron.errors import ConfigError, StoreError
from quorum_cron.store.redis import RedisStore
from quorum_cron.web import views
from quorum_cron.web.live import Broadcaster
from quorum_cron.web.tokens import AdminTokens

__all__ = ["WebContext", "create_app"]

HERE = Path(__file__).resolve().parent
SESSION_COOKIE = "qc_session"
SESSION_TTL_S = 12 * 3600
MAX_SESSIONS = 1000
MIN_WINDOW_MS = 60_000
MAX_WINDOW_MS = 31 * 86_400_000
MAX_PAGE = 1000
MAX_BODY = 16 * 1024
"""Forms and JSON bodies are small; a larger body is refused before it is read whole."""
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
ACTIONS = ("trigger", "pause", "resume")


@dataclass
class _Session:
    name: str
    digest: str
    csrf: str
    expires: float


@dataclass
class WebContext:
    """What the app serves from: the local config (job names and definitions), the store, the tokens."""

    config: Config
    store: RedisStore
    shown_url: str
    tokens: AdminTokens = field(default_factory=AdminTokens)
    sessions: dict[str, _Session] = field(default_factory=dict)


class _SecurityHeaders:
    """Adds the security headers to every response (a pure ASGI middleware: SSE keeps streaming)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),
                    (b"x-frame-options", b"DENY"),
                ]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["t"] = views.fmt_ms
    env.filters["dur"] = _fmt_dur
    env.filters["ago"] = _ago
    env.filters["spark"] = _spark
    return env


def _spark(states: list[str]) -> Markup:
    """Recent outcomes, oldest first, as a strip of coloured marks (built here: hundreds per page)."""
    counts: dict[str, int] = {}
    for s in states:
        counts[s] = counts.get(s, 0) + 1
    label = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    marks = "".join(f'<i class="f-{escape(s)}"></i>' for s in states)
    return Markup(f'<span class="spark" title="last {len(states)}: {escape(label)}">{marks}</span>')


def _fmt_dur(ms: int | None) -> str:
    if ms is None:
        return "-"
    if abs(ms) < 1000:
        return f"{ms} ms"
    if abs(ms) < 120_000:
        return f"{ms / 1000:.1f} s"
    return format_duration(ms - ms % 1000) if ms % 60_000 else format_duration(ms)


def _ago(ms: int, now: int) -> str:
    delta = now - ms
    text = _fmt_dur(abs(delta))
    return f"{text} ago" if delta >= 0 else f"in {text}"


def create_app(ctx: WebContext) -> Starlette:
    """The ASGI app for ``ctx`` (``uvicorn`` serves it; tests may call it in process)."""
    env = _environment()
    jobs = [s.name for s in ctx.config.jobs]
    broadcaster = Broadcaster(ctx.store, jobs, members_every_s=ctx.config.cluster.heartbeat_ms / 1000)
    recent = views.RecentLedger()

    # -- helpers -------------------------------------------------------------

    def prefix(request: Request) -> str:
        return str(request.scope.get("root_path", "")).rstrip("/")

    def session_of(request: Request) -> _Session | None:
        sid = request.cookies.get(SESSION_COOKIE, "")
        s = ctx.sessions.get(sid) if sid else None
        if s is None:
            return None
        if s.expires < time.monotonic() or not ctx.tokens.still_valid(s.name, s.digest):
            ctx.sessions.pop(sid, None)
            return None
        return s

    def render(request: Request, name: str, data: dict[str, Any], status: int = 200) -> HTMLResponse:
        session = session_of(request)
        fragment = request.query_params.get("fragment") == "1"
        html = env.get_template(name).render(
            layout="fragment.html" if fragment else "base.html",
            d=data,
            root=prefix(request),
            admin=ctx.tokens.enabled,
            user=session.name if session else "",
            csrf=session.csrf if session else "",
            namespace=ctx.config.cluster.namespace,
            page=name.removesuffix(".html"),
            jobs_defined=jobs,
            message=done if (done := request.query_params.get("done", "")) in ACTIONS else "",
        )
        return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})

    def problem(request: Request, status: int, message: str) -> Response:
        if request.url.path.startswith(prefix(request) + "/api/") or request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=status)
        return render(request, "message.html", {"title": f"HTTP {status}", "message": message}, status)

    async def read(request: Request, fn: Callable[..., dict[str, Any]], *args: Any, **kw: Any) -> Any:
        try:
            return await run_in_threadpool(fn, *args, **kw)
        except StoreError as exc:
            raise _Refused(503, f"cannot read the store at {ctx.shown_url}: {exc}") from None

    def job_of(request: Request) -> str:
        job = str(request.path_params["job"])
        if job not in jobs:
            raise _Refused(404, f"unknown job {job!r}: this server's config defines {len(jobs)} job(s)")
        return job

    def job_args(request: Request) -> dict[str, Any]:
        q = request.query_params
        out: dict[str, Any] = {}
        if q.get("window"):
            try:
                ms = parse_duration(q["window"], what="window")
            except ConfigError as exc:
                raise _Refused(400, str(exc)) from None
            if not MIN_WINDOW_MS <= ms <= MAX_WINDOW_MS:
                raise _Refused(400, f"window {q['window']!r} is out of range (expected 1m to 31d)")
            out["window_ms"] = ms
        for key, name, lo, hi in (("to", "to_ms", 1, 10**15), ("page", "page", 0, MAX_PAGE)):
            if q.get(key):
                if not q[key].isdigit() or not lo <= int(q[key]) <= hi:
                    raise _Refused(400, f"{key} {q[key]!r} is not a whole number from {lo} to {hi}")
                out[name] = int(q[key])
        return out

    def handle(fn: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def wrapped(request: Request) -> Response:
            try:
                return await fn(request)
            except _Refused as exc:
                return problem(request, exc.status, exc.message)

        return wrapped

    # -- pages and their JSON ------------------------------------------------

    async def cluster_data(request: Request) -> dict[str, Any]:
        data: dict[str, Any] = await read(
            request, views.cluster_view, ctx.store, ctx.config, ctx.shown_url, recent
        )
        return data

    async def jobs_data(request: Request) -> dict[str, Any]:
        state = request.query_params.get("state", "all")
        if state not in views.FILTERS:
            raise _Refused(
                400, f"state {state!r} is not a filter: expected one of {', '.join(views.FILTERS)}"
            )
        data: dict[str, Any] = await read(request, views.jobs_view, ctx.store, ctx.config, state, recent)
        return data

    async def job_data(request: Request) -> dict[str, Any]:
        job = job_of(request)
        data: dict[str, Any] = await read(
            request, views.job_view, ctx.store, ctx.config, job, **job_args(request)
        )
        return data

    async def slot_data(request: Request) -> dict[str, Any]:
        job = job_of(request)
        raw = str(request.path_params["fire_ms"])
        if not raw.isdigit() or len(raw) > 15:
            raise _Refused(400, f"slot {raw!r} is not a fire time in epoch milliseconds")
        data: dict[str, Any] = await read(request, views.slot_view, ctx.store, ctx.config, job, int(raw))
        return data

    async def audit_data(request: Request) -> dict[str, Any]:
        data: dict[str, Any] = await read(request, views.audit_view, ctx.store, ctx.config)
        return data

    def page(
        name: str, loader: Callable[[Request], Awaitable[dict[str, Any]]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return render(request, f"{name}.html", await loader(request))

        return endpoint

    def api(
        loader: Callable[[Request], Awaitable[dict[str, Any]]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return JSONResponse(await loader(request), headers={"Cache-Control": "no-store"})

        return endpoint

    # -- live ----------------------------------------------------------------

    async def events(request: Request) -> Response:
        queue = broadcaster.subscribe()

        async def stream() -> AsyncIterator[str]:
            try:
                yield "retry: 2000\n: connected\n\n"
                while True:
                    try:
                        yield await asyncio.wait_for(queue.get(), 15)
                    except TimeoutError:
                        yield ": keep-alive\n\n"
            finally:
                broadcaster.unsubscribe(queue)

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    # -- acting --------------------------------------------------------------

    async def body_of(request: Request) -> bytes:
        size = request.headers.get("content-length", "")
        if size.isdigit() and int(size) > MAX_BODY:
            raise _Refused(413, f"request body of {size} bytes is too large (expected at most {MAX_BODY})")
        chunks: list[bytes] = []
        total = 0
        async for chunk in request.stream():
            total += len(chunk)
            if total > MAX_BODY:
                raise _Refused(413, f"request body is too large (expected at most {MAX_BODY} bytes)")
            chunks.append(chunk)
        return b"".join(chunks)

    async def form_of(request: Request) -> dict[str, str]:
        """An ``application/x-www-form-urlencoded`` body (what the pages' forms send), bounded."""
        text = (await body_of(request)).decode("utf-8", errors="replace")
        try:
            return dict(urllib.parse.parse_qsl(text, keep_blank_values=True, max_num_fields=20))
        except ValueError:
            raise _Refused(400, "form has more than 20 fields (expected a page's form)") from None

    def same_origin(request: Request) -> bool:
        origin = request.headers.get("origin")
        if origin is None:
            return True  # not a browser, or an old one: the CSRF token still decides
        return origin == f"{request.url.scheme}://{request.url.netloc}"

    async def act(job: str, action: str, who: str, reason: str) -> dict[str, Any]:
        def call() -> dict[str, Any]:
            if action == "trigger":
                fire_ms = ctx.store.trigger(job, who)
                return {"job": job, "action": action, "by": who, "slot_ms": fire_ms}
            control = ctx.store.pause(job, who, reason) if action == "pause" else ctx.store.resume(job, who)
            return {"job": job, "action": action, "by": who, "paused": control.paused}

        try:
            return await run_in_threadpool(call)
        except StoreError as exc:
            raise _Refused(
                503, f"cannot {action} {job!r} through the store at {ctx.shown_url}: {exc}"
            ) from None

    def check_reason(reason: str) -> str:
        reason = reason.strip()
        if len(reason) > MAX_REASON or "\n" in reason or "\r" in reason:
            raise _Refused(
                400, f"reason is {len(reason)} characters: expected one line of at most {MAX_REASON}"
            )
        return reason

    async def page_action(request: Request) -> Response:
        job = job_of(request)
        action = str(request.path_params["action"])
        if action not in ACTIONS:
            raise _Refused(404, f"unknown action {action!r}: expected one of {', '.join(ACTIONS)}")
        if not ctx.tokens.enabled:
            raise _Refused(403, "refused: this server is read-only (started without an admin token)")
        session = session_of(request)
        if session is None:
            raise _Refused(403, "refused: log in with an admin token to trigger, pause or resume")
        form = await form_of(request)
        sent = form.get("csrf", "")
        if not same_origin(request) or not hmac.compare_digest(sent.encode(), session.csrf.encode()):
            raise _Refused(403, "refused: the request did not come from this server's page (CSRF check)")
        await act(job, action, session.name, check_reason(form.get("reason", "")))
        return RedirectResponse(f"{prefix(request)}/jobs/{job}?done={action}", status_code=303)

    async def api_action(request: Request) -> Response:
        job = job_of(request)
        action = str(request.path_params["action"])
        if action not in ACTIONS:
            raise _Refused(404, f"unknown action {action!r}: expected one of {', '.join(ACTIONS)}")
        if not ctx.tokens.enabled:
            raise _Refused(403, "refused: this server is read-only (started without an admin token)")
        scheme, _, presented = request.headers.get("authorization", "").partition(" ")
        who = ctx.tokens.check(presented) if scheme.lower() == "bearer" else None
        if who is None:
            raise _Refused(
                403, "refused: expected 'Authorization: Bearer NAME:SECRET' with a current admin token"
            )
        reason = ""
        if action == "pause":
            raw = await body_of(request)
            try:
                body = json.loads(raw) if raw.strip() else {}
            except ValueError:
                raise _Refused(400, 'body is not JSON: expected {"reason": "..."}') from None
            if not isinstance(body, dict) or not isinstance(body.get("reason", ""), str):
                raise _Refused(400, 'body is not {"reason": "..."}')
            reason = check_reason(str(body.get("reason", "")))
        return JSONResponse(await act(job, action, who, reason))

    # -- sessions ------------------------------------------------------------

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return render(request, "login.html", {"error": ""})
        if not ctx.tokens.enabled:
            raise _Refused(403, "refused: this server is read-only (started without an admin token)")
        if not same_origin(request):
            raise _Refused(403, "refused: the request did not come from this server's page (CSRF check)")
        form = await form_of(request)
        presented = form.get("token", "")
        name = ctx.tokens.check(presented)
        if name is None:
            await asyncio.sleep(0.5)  # slows guessing down; the secret is long anyway
            return render(request, "login.html", {"error": "not a current admin token"}, 403)
        now = time.monotonic()
        for sid, s in list(ctx.sessions.items()):
            if s.expires < now:
                del ctx.sessions[sid]
        while len(ctx.sessions) >= MAX_SESSIONS:
            ctx.sessions.pop(next(iter(ctx.sessions)))
        sid = secrets.token_urlsafe(32)
        ctx.sessions[sid] = _Session(
            name, AdminTokens.digest_of(presented), secrets.token_urlsafe(32), now + SESSION_TTL_S
        )
        response = RedirectResponse(f"{prefix(request)}/", status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            sid,
            max_age=SESSION_TTL_S,
            path=prefix(request) or "/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    async def logout(request: Request) -> Response:
        session = session_of(request)
        if session is not None:
            form = await form_of(request)
            if same_origin(request) and hmac.compare_digest(
                str(form.get("csrf", "")).encode(), session.csrf.encode()
            ):
                ctx.sessions.pop(request.cookies.get(SESSION_COOKIE, ""), None)
        response = RedirectResponse(f"{prefix(request)}/", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=prefix(request) or "/")
        return response

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await broadcaster.close()

    routes = [
        Route("/", handle(page("jobs", jobs_data))),
        Route("/cluster", handle(page("cluster", cluster_data))),
        Route("/audit", handle(page("audit", audit_data))),
        Route("/jobs/{job}", handle(page("job", job_data))),
        Route("/jobs/{job}/slots/{fire_ms}", handle(page("slot", slot_data))),
        Route("/jobs/{job}/{action}", handle(page_action), methods=["POST"]),
        Route("/login", handle(login), methods=["GET", "POST"]),
        Route("/logout", handle(logout), methods=["POST"]),
        Route("/healthz", healthz),
        Route("/api/cluster", handle(api(cluster_data))),
        Route("/api/jobs", handle(api(jobs_data))),
        Route("/api/jobs/{job}", handle(api(job_data))),
        Route("/api/jobs/{job}/slots/{fire_ms}", handle(api(slot_data))),
        Route("/api/jobs/{job}/{action}", handle(api_action), methods=["POST"]),
        Route("/api/audit", handle(api(audit_data))),
        Route("/api/events", events),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.broadcaster = broadcaster
    app.add_middleware(_SecurityHeaders)
    return app
