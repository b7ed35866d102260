"""Serving the web face with uvicorn: in the foreground (``quorum-cron web``) or on a thread of the agent.

This module owns the listening socket (bound here, so that a taken port is
one clear error instead of a server log line) and the uvicorn settings both
ways of running share. Running on a thread, uvicorn installs no signal
handlers: the agent keeps its own, and stops the server when it exits.
"""

from __future__ import annotations

import ipaddress
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

import uvicorn

from quorum_cron.config.settings import Config
from quorum_cron.errors import ConfigError
from quorum_cron.store.base import ObservedStore
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.tokens import AdminTokens

__all__ = ["ServerThread", "check_forwarded_ips", "listen", "parse_bind", "serve", "start_in_thread"]


def parse_bind(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8787`` for IPv6) → (host, port); ConfigError naming the value otherwise."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not (port.isascii() and port.isdecimal()):
        raise ConfigError(f"--bind {text!r} is not HOST:PORT (expected e.g. 127.0.0.1:8787)")
    digits = port.lstrip("0") or "0"  # (length first: int() refuses thousands of digits)
    if len(digits) > 5 or int(digits) > 65535:  # it is HOST:PORT: say what is wrong with it
        shown = digits if len(digits) <= 20 else f"{digits[:20]}... ({len(digits)} digits)"
        raise ConfigError(
            f"--bind {text if len(text) <= 80 else text[:80] + '...'!r}: port {shown} is out of range "
            "(expected 0-65535, 0 for any free port; e.g. 127.0.0.1:8787)"
        )
    return host, int(digits)


def check_forwarded_ips(text: str) -> None:
    """``--forwarded-allow-ips``: ``*`` alone, or IP addresses and networks, comma-separated;
    ConfigError naming the first entry that is neither.

    uvicorn takes any other entry for a literal it compares with the peer's address as text, so
    a typo (``10.0.0.300``, ``10.0.0.0/33``, ``127.0.0.1,*``: ``*`` means "all" only alone) was
    accepted and silently trusted no proxy: behind one, every request read as the proxy's own.
    """
    if text.strip() == "*":
        return
    for entry in filter(None, (part.strip() for part in text.split(","))):  # ("": trust none)
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ConfigError(
                f"--forwarded-allow-ips: {entry[:80]!r} is not an IP address or network "
                "(expected e.g. 127.0.0.1,10.0.0.0/8, or '*' alone for any)"
            ) from None


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; ConfigError naming the address when it cannot be had."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named explicitly: asyncio sets TCP_NODELAY only on sockets whose
    # proto says TCP, and without it every keep-alive response waits ~40 ms
    # (Nagle against the client's delayed ACK: uvicorn writes head and body apart).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def _server(
    config: Config,
    store: ObservedStore,
    shown_url: str,
    tokens: AdminTokens,
    *,
    root_path: str = "",
    forwarded_allow_ips: str = "127.0.0.1",
    access_log: bool = False,
) -> uvicorn.Server:
    app = create_app(WebContext(config=config, store=store, shown_url=shown_url, tokens=tokens))
    settings = uvicorn.Config(
        app,
        root_path=root_path.rstrip("/"),
        proxy_headers=True,
        forwarded_allow_ips=forwarded_allow_ips,
        access_log=access_log,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=2,
    )
    return uvicorn.Server(settings)


def serve(
    sock: socket.socket,
    config: Config,
    store: ObservedStore,
    shown_url: str,
    tokens: AdminTokens,
    *,
    root_path: str = "",
    forwarded_allow_ips: str = "127.0.0.1",
    access_log: bool = False,
    announce: Callable[[], None] = lambda: None,
) -> None:
    """Serve until SIGTERM or SIGINT, then stop gracefully and return (a second signal: at once).

    The server runs on a thread and this (main) thread owns the signals, so
    that a stop is an ordinary return (exit status 0), not uvicorn re-raising
    the signal; ``announce`` is called once the handlers are in place.
    """
    server = _server(
        config,
        store,
        shown_url,
        tokens,
        root_path=root_path,
        forwarded_allow_ips=forwarded_allow_ips,
        access_log=access_log,
    )

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if server.should_exit:
            server.force_exit = True
        server.should_exit = True

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="web")
        thread.start()
        announce()
        while thread.is_alive():
            thread.join(0.5)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclass
class ServerThread:
    """A web server running on a daemon thread; :meth:`stop` ends it."""

    server: uvicorn.Server
    thread: threading.Thread

    def stop(self, timeout: float = 5.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)


def start_in_thread(
    sock: socket.socket, config: Config, store: ObservedStore, shown_url: str, tokens: AdminTokens
) -> ServerThread:
    """The web face on a thread of this process (the agent's ``--web-port``)."""
    server = _server(config, store, shown_url, tokens)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="web", daemon=True)
    thread.start()
    return ServerThread(server, thread)
