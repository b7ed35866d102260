"""``quorum-cron web``: the dashboard (``quorum_cron.web``) in the foreground.

Needs the ``web`` extra (Starlette, uvicorn, Jinja2); without it the command
says so in one line. Read-only unless admin tokens are given by file
(``--admin-token-file`` or ``$QUORUM_CRON_WEB_TOKEN_FILE``) or environment
(``$QUORUM_CRON_WEB_TOKEN``) — never as an option value, which every user of
the machine could read in the process list. See ``docs/web.md``.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

import click

from quorum_cron.commands.common import config_option, fail, load, redis_option, store_for
from quorum_cron.config.settings import Config
from quorum_cron.errors import ConfigError

if TYPE_CHECKING:
    from quorum_cron.web.server import ServerThread

__all__ = ["missing_web_extra", "start_web_thread", "web"]

_NEEDED = ("starlette", "uvicorn", "jinja2")


def missing_web_extra() -> str | None:
    """The one-line error when a library of the ``web`` extra is missing, else None."""
    missing = []
    for name in _NEEDED:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if not missing:
        return None
    return (
        f"the web dashboard needs {', '.join(missing)} (not installed): "
        f"expected the web extra, pip install 'quorum-cron[web]'"
    )


@click.command("web")
@config_option
@redis_option
@click.option(
    "--bind", default="127.0.0.1:8787", show_default=True, metavar="HOST:PORT", help="Address to serve on."
)
@click.option(
    "--admin-token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="File of admin tokens (NAME:SECRET per line); without one the server is read-only. "
    "Env: QUORUM_CRON_WEB_TOKEN_FILE, or QUORUM_CRON_WEB_TOKEN for one token.",
)
@click.option("--root-path", default="", metavar="PREFIX", help="URL prefix behind a reverse proxy (/cron).")
@click.option(
    "--forwarded-allow-ips",
    default="127.0.0.1",
    show_default=True,
    metavar="IPS",
    help="Proxies whose X-Forwarded-* headers are trusted (comma-separated, or '*').",
)
@click.option("--access-log", is_flag=True, help="Log every request (uvicorn's access log).")
def web(
    config_path: Path,
    redis_url: str | None,
    bind: str,
    admin_token_file: Path | None,
    root_path: str,
    forwarded_allow_ips: str,
    access_log: bool,
) -> None:
    """Serve the dashboard: cluster, jobs, expected-vs-actual timelines, slots, audit (read-only default)."""
    problem = missing_web_extra()
    if problem:
        fail(problem)
    from quorum_cron.web.server import check_forwarded_ips, listen, parse_bind, serve
    from quorum_cron.web.tokens import AdminTokens

    config = load(config_path)
    if root_path and not root_path.startswith("/"):
        fail(f"--root-path {root_path!r} is not a URL path: expected it to start with '/', e.g. /cron")
    try:
        check_forwarded_ips(forwarded_allow_ips)
        host, port = parse_bind(bind)
        tokens = AdminTokens.from_environment(admin_token_file)
        sock = listen(host, port)
    except ConfigError as exc:
        fail(str(exc))
    if tokens.file is not None and tokens.file.stat().st_mode & 0o077:
        click.echo(
            f"warning: admin token file {str(tokens.file)!r} can be read by other users "
            f"(expected mode 600: chmod 600 {tokens.file})",
            err=True,
        )
    store, shown = store_for(config, redis_url)
    names = sorted(tokens.current()) if tokens.enabled else []
    mode = f"admin tokens: {', '.join(names) or 'none yet'}" if tokens.enabled else "read-only"
    where = f"http://{host if ':' not in host else f'[{host}]'}:{sock.getsockname()[1]}{root_path}/"
    line = f"quorum-cron web: cluster {config.cluster.namespace} on {shown}, serving {where} ({mode})"
    try:
        serve(
            sock,
            config,
            store,
            shown,
            tokens,
            root_path=root_path,
            forwarded_allow_ips=forwarded_allow_ips,
            access_log=access_log,
            announce=lambda: click.echo(line, err=True),
        )
    finally:
        store.close()


def start_web_thread(config: Config, redis_url: str | None, addr: str, port: int) -> ServerThread:
    """The agent's ``--web-port``: the dashboard on a thread, its own store connection, tokens from env."""
    problem = missing_web_extra()
    if problem:
        fail(problem)
    from quorum_cron.web.server import listen, start_in_thread
    from quorum_cron.web.tokens import AdminTokens

    try:
        tokens = AdminTokens.from_environment()
        sock = listen(addr, port)
    except ConfigError as exc:
        fail(str(exc))
    store, shown = store_for(config, redis_url)
    return start_in_thread(sock, config, store, shown, tokens)
