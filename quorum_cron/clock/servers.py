"""How an NTP server is written: ``HOST``, ``HOST:PORT``, ``[IPV6]`` or ``[IPV6]:PORT``.

Pure text, no socket: the configuration checks ``cluster.ntp_servers`` with
it when the file is read, so that ``validate`` refuses ``"pool ntp org"`` or
``"ntp:abc"`` instead of the agent reporting "cannot resolve" at every clock
check for as long as it runs. The NTP client (:mod:`quorum_cron.clock.ntp`)
reads its servers through it too, so both accept the same forms.
"""

from __future__ import annotations

import ipaddress
import re

from quorum_cron.errors import ConfigError

__all__ = ["NTP_PORT", "ntp_server_problem", "split_ntp_server"]

NTP_PORT = 123
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?", re.ASCII)
_MAX_NAME = 253


def _is_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return True
    name = host.removesuffix(".")
    return 0 < len(name) <= _MAX_NAME and all(_LABEL.fullmatch(label) for label in name.split("."))


def split_ntp_server(spec: str) -> tuple[str, int]:
    """``spec`` as (host, port); a one-line ConfigError naming ``spec`` and the expected form."""
    text = spec.strip()
    m = re.fullmatch(r"\[([^\]]+)\](?::(\w+))?", text)
    if m is not None:
        host, port = m.group(1), m.group(2)
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:
        host, port = text, None
    if not host:
        raise ConfigError(f"invalid NTP server {spec!r}: expected HOST or HOST:PORT")
    if not _is_host(host):
        raise ConfigError(f"invalid NTP server {spec!r}: {host!r} is not a host name or IP address")
    if port is None:
        return host, NTP_PORT
    # ASCII decimals only: '²'.isdigit() is true and int('²') raises (a traceback from validate).
    if not (port.isascii() and port.isdecimal()) or not 0 < int(port) < 65536:
        raise ConfigError(f"invalid NTP server {spec!r}: port {port!r} is not a number from 1 to 65535")
    return host, int(port)


def ntp_server_problem(spec: str) -> str | None:
    """What is wrong with ``spec`` as an NTP server (None: nothing)."""
    if not isinstance(spec, str):  # (the Python API's: App(ntp_servers=[1]) raised AttributeError)
        return f"{type(spec).__name__} {spec!r} is not an NTP server (expected a string, e.g. 'pool.ntp.org')"
    try:
        split_ntp_server(spec)
    except ConfigError as exc:
        return str(exc)
    return None
