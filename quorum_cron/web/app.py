"""The web face: a Starlette app serving the pages, the JSON API and the live event stream.

Routes (the JSON API is documented in ``docs/web.md``)::

    GET  /                      jobs (filter ?state=failed|missed|paused)
    GET  /cluster               members, quorum health, store, recent alerts and problems
    GET  /jobs/{job}            expected-vs-actual timeline (?window=1h&to=<ms>), history (?page=N)
    GET  /jobs/{job}/slots/{ms} one slot: votes, quorum, executor and why, token, output
    GET  /audit                 operator actions
    GET  /api/...               the same as JSON; /api/events: server-sent events
    POST /jobs/{job}/{trigger|pause|resume}       from the pages (session + CSRF token)
    POST /api/jobs/{job}/{trigger|pause|resume}   for tools (Authorization: Bearer NAME:SECRET)
    GET|POST /login (?next=<path>: the page to go back to), POST /logout
    GET  /healthz               liveness: "ok" while the process serves (the store is not asked)
    GET  /readyz                readiness: 200 when the store answers, 503 and why when not (.probes)
    GET  /favicon.ico           204 (no icon; answered so that no page load logs a 404)

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

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
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

from quorum_cron.config.settings import Config
from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.store.base import ObservedStore
from quorum_cron.store.connect import store_failure
from quorum_cron.web import views
from quorum_cron.web.actions import ACTIONS, perform, said
from quorum_cron.web.inputs import (
    Refused,
    body_of,
    check_reason,
    form_of,
    job_args,
    safe_next,
    same_origin,
    slot_ms,
    unknown_job,
)
from quorum_cron.web.live import Broadcaster
from quorum_cron.web.present import SecurityHeaders, environment, job_segment
from quorum_cron.web.probes import Readiness
from quorum_cron.web.tokens import AdminTokens

__all__ = ["MAX_EVENT_STREAMS", "WebContext", "create_app"]

HERE = Path(__file__).resolve().parent
SESSION_COOKIE = "qc_session"
SESSION_TTL_S = 12 * 3600
MAX_SESSIONS = 1000
MAX_EVENT_STREAMS = 200
"""Live-update streams (``/api/events``) one server keeps open at once (about one per open page);
past it a new one is a 503 and the page says it is not live. Each stream holds a socket and a queue
of at most 200 events, and every event is written to each: the cap bounds both."""
KEPT_QUERY = ("window", "to")
"""The job page's query arguments its history pager keeps (the timeline's window)."""
TOKENS_UNREADABLE = (
    "refused: this server cannot read its admin tokens right now, so it accepts none "
    "(its log names the file and line)"
)


@dataclass
class _Session:
    """An admin's session: the CSRF token and the secret's digest are credentials, kept out of repr."""

    name: str
    digest: str = field(repr=False)
    csrf: str = field(repr=False)
    expires: float
    flash: tuple[str, str] | None = None
    """(job, what was done): said once on that job's page after this session acted on it."""


class _Stream(StreamingResponse):
    """A streaming response that calls ``release`` once it ends, however it ends.

    The event stream's subscription is counted from the request (the cap is
    checked and taken in one step) and given back here: a client gone
    before the stream's generator ever ran still gives it back.
    """

    def __init__(self, content: AsyncIterator[str], *, release: Callable[[], None], **kw: Any) -> None:
        super().__init__(content, **kw)
        self._release = release

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


@dataclass
class WebContext:
    """What the app serves from: the local config (job names and definitions), the store, the tokens.

    ``sessions`` is keyed by live session ids (the cookie that IS the login): out of ``repr``,
    so that printing the context (a debug line, an error report) hands no one a session.
    """

    config: Config
    store: ObservedStore
    shown_url: str
    tokens: AdminTokens = field(default_factory=AdminTokens)
    sessions: dict[str, _Session] = field(default_factory=dict, repr=False)
    max_event_streams: int = MAX_EVENT_STREAMS


def create_app(ctx: WebContext) -> Starlette:
    """The ASGI app for ``ctx`` (``uvicorn`` serves it; tests may call it in process)."""
    env = environment()
    jobs = [s.name for s in ctx.config.jobs]
    broadcaster = Broadcaster(
        ctx.store,
        jobs,
        members_every_s=ctx.config.cluster.heartbeat_ms / 1000,
        namespace=ctx.config.cluster.namespace,
    )
    recent = views.RecentLedger()
    readiness = Readiness(ctx.store, ctx.shown_url)

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

    def here(request: Request) -> str:
        """This page's address relative to the root, as sent (a login's ``next``). For a POST, the
        job page its form was on (a refused action's page logs in back to it), else ""."""
        if request.method != "GET":
            job = request.path_params.get("job")
            posted = job is not None and "action" in request.path_params
            return f"/jobs/{job_segment(str(job))}" if posted else ""
        raw = request.scope.get("raw_path")
        path = raw.decode("latin-1") if isinstance(raw, bytes) else urllib.parse.quote(request.url.path)
        root = prefix(request)
        if root and path.startswith(root):
            path = path[len(root) :]
        query = [(k, v) for k, v in request.query_params.multi_items() if k not in ("fragment", "next")]
        return path + ("?" + urllib.parse.urlencode(query) if query else "")

    def flash(request: Request, session: _Session | None, name: str, data: dict[str, Any]) -> str:
        """What this session just did to the job this page shows, said once (a page, not its refresh)."""
        if session is None or session.flash is None or name != "job.html":
            return ""
        if request.query_params.get("fragment") == "1" or session.flash[0] != data.get("job"):
            return ""
        text = session.flash[1]
        session.flash = None
        return text

    def render(request: Request, name: str, data: dict[str, Any], status: int = 200) -> HTMLResponse:
        session = session_of(request)
        fragment = request.query_params.get("fragment") == "1"
        kept = [(k, v) for k in KEPT_QUERY if (v := request.query_params.get(k, ""))]
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
            message=flash(request, session, name, data),
            here=str(data["next"]) if name == "login.html" else here(request),
            kept=urllib.parse.urlencode(kept),
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
            if isinstance(exc, StoreUnavailable):
                recent.forget()  # it may come back with another ledger (a restart, a failover)
            raise Refused(503, f"cannot read the store at {ctx.shown_url}: {store_failure(exc)}") from None

    def job_of(request: Request) -> str:
        job = str(request.path_params["job"])
        if "%" in job:  # ``.`` and ``..`` are linked as %252E (present.job_segment); no job name has a %
            job = urllib.parse.unquote(job)
        if job not in jobs:
            raise unknown_job(job, jobs)
        return job

    def handle(fn: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def wrapped(request: Request) -> Response:
            try:
                return await fn(request)
            except Refused as exc:
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
            raise Refused(400, f"state {state[:40]!r} is not a filter: expected {', '.join(views.FILTERS)}")
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
        fire_ms = slot_ms(str(request.path_params["fire_ms"]))
        data: dict[str, Any] = await read(request, views.slot_view, ctx.store, ctx.config, job, fire_ms)
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
        if broadcaster.subscribers >= ctx.max_event_streams:
            return JSONResponse(
                {
                    "error": f"refused: {broadcaster.subscribers} live-update streams are open, "
                    f"this server's limit (pages still load; reload one later to see it live)"
                },
                status_code=503,
                headers={"Cache-Control": "no-store", "Retry-After": "30"},
            )
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

        return _Stream(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
            release=lambda: broadcaster.unsubscribe(queue),
        )

    # -- acting --------------------------------------------------------------

    async def act(job: str, action: str, who: str, reason: str) -> dict[str, Any]:
        try:
            return await run_in_threadpool(perform, ctx.store, job, action, who, reason)
        except StoreError as exc:
            raise Refused(
                503, f"cannot {action} {job!r} through the store at {ctx.shown_url}: {store_failure(exc)}"
            ) from None

    async def page_action(request: Request) -> Response:
        job = job_of(request)
        action = str(request.path_params["action"])
        if action not in ACTIONS:
            raise Refused(404, f"unknown action {action!r}: expected one of {', '.join(ACTIONS)}")
        if not ctx.tokens.enabled:
            raise Refused(403, "refused: this server is read-only (started without an admin token)")
        session = session_of(request)
        if session is None:
            if ctx.tokens.problem():
                raise Refused(403, TOKENS_UNREADABLE)
            raise Refused(403, "refused: log in with an admin token to trigger, pause or resume")
        form = await form_of(request)
        sent = form.get("csrf", "")
        if not same_origin(request) or not hmac.compare_digest(sent.encode(), session.csrf.encode()):
            raise Refused(403, "refused: the request did not come from this server's page (CSRF check)")
        done = await act(job, action, session.name, check_reason(form.get("reason", "")))
        # Said on the job's page from this session, once: a link (?done=...) could claim anything.
        session.flash = (job, said(done))
        return RedirectResponse(f"{prefix(request)}/jobs/{job_segment(job)}", status_code=303)

    async def api_action(request: Request) -> Response:
        job = job_of(request)
        action = str(request.path_params["action"])
        if action not in ACTIONS:
            raise Refused(404, f"unknown action {action!r}: expected one of {', '.join(ACTIONS)}")
        if not ctx.tokens.enabled:
            raise Refused(403, "refused: this server is read-only (started without an admin token)")
        scheme, _, presented = request.headers.get("authorization", "").partition(" ")
        who = ctx.tokens.check(presented) if scheme.lower() == "bearer" else None
        if who is None:
            if ctx.tokens.problem():
                raise Refused(403, TOKENS_UNREADABLE)
            raise Refused(
                403, "refused: expected 'Authorization: Bearer NAME:SECRET' with a current admin token"
            )
        reason = ""
        if action == "pause":
            raw = await body_of(request)
            try:
                body = json.loads(raw) if raw.strip() else {}
            except ValueError:
                raise Refused(400, 'body is not JSON: expected {"reason": "..."}') from None
            if not isinstance(body, dict) or not isinstance(body.get("reason", ""), str):
                raise Refused(400, 'body is not {"reason": "..."}')
            reason = check_reason(str(body.get("reason", "")))
        return JSONResponse(await act(job, action, who, reason))

    # -- sessions ------------------------------------------------------------

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return render(
                request, "login.html", {"error": "", "next": safe_next(request.query_params.get("next", ""))}
            )
        if not ctx.tokens.enabled:
            raise Refused(403, "refused: this server is read-only (started without an admin token)")
        if not same_origin(request):
            raise Refused(403, "refused: the request did not come from this server's page (CSRF check)")
        form = await form_of(request)
        presented = form.get("token", "")
        back = safe_next(form.get("next", ""))
        name = ctx.tokens.check(presented)
        if name is None:
            await asyncio.sleep(0.5)  # slows guessing down; the secret is long anyway
            error = TOKENS_UNREADABLE if ctx.tokens.problem() else "not a current admin token"
            return render(request, "login.html", {"error": error, "next": back}, 403)
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
        response = RedirectResponse(prefix(request) + back, status_code=303)
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

    async def crashed(request: Request, exc: Exception) -> Response:
        # A bug, not a refusal: one line in the page's own form (JSON under /api/), never a bare
        # "Internal Server Error". Starlette re-raises it after this, so uvicorn still logs the traceback.
        try:
            return problem(request, 500, f"internal error ({type(exc).__name__}): see the server's log")
        except Exception:
            return PlainTextResponse("internal error: see the server's log", status_code=500)

    async def unrouted(request: Request, exc: HTTPException) -> Response:
        # Starlette's own 404 (no such path) and 405 (a GET to an action): {"error"} under /api/ too.
        what = f"{exc.detail}: {request.method} {request.url.path[:200]}"
        response = problem(request, exc.status_code, what)
        response.headers.update(exc.headers or {})  # a 405's Allow
        return response

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")  # liveness: never the store's state (module probes)

    async def readyz(request: Request) -> Response:
        status, line = await readiness.answer()
        return PlainTextResponse(line, status_code=status, headers={"Cache-Control": "no-store"})

    async def favicon(request: Request) -> Response:
        # No icon (the pages say so with <link rel="icon" href="data:,">); a browser that asks
        # anyway gets an empty answer it may keep for a day, not a 404 on every page load.
        return Response(status_code=204, headers={"Cache-Control": "public, max-age=86400"})

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
        Route("/readyz", readyz),
        Route("/favicon.ico", favicon),
        Route("/api/cluster", handle(api(cluster_data))),
        Route("/api/jobs", handle(api(jobs_data))),
        Route("/api/jobs/{job}", handle(api(job_data))),
        Route("/api/jobs/{job}/slots/{fire_ms}", handle(api(slot_data))),
        Route("/api/jobs/{job}/{action}", handle(api_action), methods=["POST"]),
        Route("/api/audit", handle(api(audit_data))),
        Route("/api/events", events),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    handlers: dict[Any, Any] = {HTTPException: unrouted, Exception: crashed}  # by exception type
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=handlers)
    app.state.broadcaster = broadcaster
    app.add_middleware(SecurityHeaders)
    return app
