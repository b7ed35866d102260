"""Redis URLs: the three deployment forms, parsed and validated once (no client is built here).

Forms (``docs/operations.md`` documents them for users):

* **standalone** — ``redis://[[user]:password@]host[:port][/db]``,
  ``rediss://...`` (TLS), ``unix://[[user]:password@]/path.sock[?db=N]``:
  redis-py's own URL forms, handed to :meth:`redis.Redis.from_url`;
* **Sentinel** — ``redis+sentinel://[[user]:password@]host1[:port],host2[:port],.../master-name[/db]``
  with optional ``?sentinel_username=U&sentinel_password=P``: the
  userinfo authenticates to the master and replicas, the query parameters
  to the sentinels (they often differ). Port default 26379;
* **Cluster** — ``redis+cluster://[[user]:password@]host1[:port],host2[:port],...``
  (``rediss+cluster://`` for TLS): seed nodes, any reachable one is enough;
  the DB is always 0 (``/0`` is accepted). Port default 6379.

In every form the userinfo ends at the LAST ``@`` (where
:func:`~quorum_cron.redact.redact_url` ends the masking), and a raw ``/ ? #``
in it is refused: it must be percent-encoded. Ports and DB numbers are
ASCII decimals only. A host is checked as the client will resolve it
(:func:`_host_problem`): a name no resolver can look up (``my host``, a
control character, an empty label) is refused here rather than retried as
an outage forever.

:func:`parse_redis_url` returns a :class:`RedisTarget` or raises
:class:`~quorum_cron.errors.ConfigError` with one line naming the bad part
(the URL is always shown redacted). This module only parses and
validates, so the configuration checks a URL without loading a client: the
client for a parsed URL is built by :mod:`quorum_cron.store.connect`, a
store by :func:`quorum_cron.store.options.open_store`.
"""

from __future__ import annotations

import ipaddress
import string
import unicodedata
import urllib.parse
from dataclasses import dataclass, field
from typing import Literal

from quorum_cron.errors import ConfigError
from quorum_cron.printable import printable
from quorum_cron.redact import redact_url

__all__ = [
    "Mode",
    "RedisTarget",
    "bad_url",
    "host_port",
    "parse_redis_url",
    "redis_url_problem",
    "userinfo_shown",
    "wrong_kind",
]

Mode = Literal["standalone", "sentinel", "cluster"]

STANDALONE_SCHEMES = ("redis", "rediss", "unix")
SENTINEL_SCHEMES = ("redis+sentinel",)
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
_SENTINEL_PARAMS = ("sentinel_username", "sentinel_password")
EXPECTED = (
    "expected redis://, rediss://, unix://, redis+sentinel://HOST[:PORT],.../MASTER[/DB] "
    "or redis+cluster://HOST[:PORT],..."
)


@dataclass(frozen=True)
class RedisTarget:
    """A parsed Redis URL. ``hosts`` are (host, port) pairs: sentinels or cluster seeds."""

    mode: Mode
    url: str = field(repr=False)
    shown: str
    hosts: tuple[tuple[str, int], ...] = ()
    master: str = ""
    db: int = 0
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    sentinel_username: str | None = field(default=None, repr=False)
    sentinel_password: str | None = field(default=None, repr=False)
    tls: bool = False


_PREFIX = "invalid redis url: "


def bad_url(shown: str, what: str) -> ConfigError:
    """``what`` continues the sentence that starts with the (redacted) URL: "has no host (...)"."""
    return ConfigError(f"{_PREFIX}{shown!r} {what}")


def _hosts(shown: str, netloc: str, default_port: int) -> tuple[tuple[str, int], ...]:
    out = []
    for part in netloc.split(","):
        part = part.strip()
        if not part:
            raise bad_url(shown, "has an empty host in its host list (expected HOST[:PORT],HOST[:PORT],...)")
        if part.startswith("["):  # [ipv6]:port
            host, _, rest = part[1:].partition("]")
            # (A zone id comes percent-encoded, RFC 6874: [fe80::1%25eth0]. The client takes the
            # address as written, so undecoded it named zone "25eth0", which exists nowhere.)
            host = urllib.parse.unquote(host)
            port_text = rest[1:] if rest.startswith(":") else ""
            if rest and not rest.startswith(":"):
                raise bad_url(shown, f"has host {part!r}, not [IPV6]:PORT")
        else:
            host, _, port_text = part.partition(":")
        if not host:
            raise bad_url(shown, f"has host {part!r} without a name")
        if problem := _host_problem(host, bracketed=part.startswith("[")):
            raise bad_url(shown, problem)
        port = default_port
        if port_text:
            if not _decimal(port_text) or not 0 < int(port_text) < 65536:
                raise bad_url(shown, f"has port {port_text!r} for {host!r} (expected a number 1-65535)")
            port = int(port_text)
        out.append((host, port))
    return tuple(out)


_HOST_ASCII = frozenset(string.ascii_letters + string.digits + "-._~!$&'()*+;=")
"""The ASCII a host name may hold: RFC 3986's unreserved and sub-delims, less ``,`` (it separates
hosts). Not ``:`` (an IPv6 address goes in brackets), ``%``, ``@``, ``/``, whitespace, controls."""
_HOST_EXPECTED = "expected a host name, an IPv4 address or an IPv6 address in brackets"


def _shown_host(host: str) -> str:
    return repr(host) if len(host) <= 60 else f"{host[:60]!r}... ({len(host)} characters)"


def _host_problem(host: str, *, bracketed: bool) -> str | None:
    """Why ``host``, as the client will resolve it, can name no server (one clause), or None.

    These passed before and were retried as an outage for ever (or made redis-py
    raise a ``UnicodeError``, not a connection error, at the first connection),
    when the URL is simply wrong: a space (``redis://my host:6379``), a control
    character, a ``:`` outside brackets, an empty or over-long label. The socket
    layer encodes every host with the ``idna`` codec, so a name that codec
    refuses can never connect either.
    Non-ASCII letters are kept: an internationalised name is a valid host.
    """
    if bracketed:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return f"has host {_shown_host('[' + host + ']')}, not an IPv6 address in brackets"
        return None
    for char in host:
        if char not in _HOST_ASCII if char.isascii() else unicodedata.category(char)[0] in "CZ":
            return f"has host {_shown_host(host)}, which holds {char!r} ({_HOST_EXPECTED})"
    try:
        host.encode("idna")
    except UnicodeError:
        return (
            f"has host {_shown_host(host)} with an empty label or one over 63 characters ({_HOST_EXPECTED})"
        )
    return None


def _decimal(text: str) -> bool:
    """Whether ``text`` is an ASCII decimal number: ``str.isdigit`` also takes ``'²'`` or ``'٣'``,
    which ``int`` then refuses (a traceback) or reads (a port the user never wrote)."""
    return text.isascii() and text.isdecimal()


_RAW_DELIMITERS = (
    "has '/', '?' or '#' in its user or password (expected them percent-encoded: %2F %3F %23; "
    "an '@' after the host as %40)"
)


def _authority(shown: str, rest: str) -> tuple[str | None, str]:
    """``rest`` (the URL after ``://``) as (userinfo or None, what follows it): every form alike.

    The userinfo ends at the LAST ``@``, as :func:`~quorum_cron.redact.redact_url` masks it, so
    what is shown and what is parsed agree on where the password is. A raw ``/ ? #`` in it is
    refused, as the client's ``urlsplit`` (and this parser, once) cuts the userinfo at the first
    of them: a password ``Xk9q/Zz`` then became a path or a host name, printed in clear in this
    very error message and later in every store error. The message shows only ``shown``, the
    password masked.
    """
    at = rest.rfind("@")
    if at < 0:
        return None, rest
    userinfo = rest[:at]
    if any(c in userinfo for c in "/?#"):
        raise bad_url(shown, _RAW_DELIMITERS)
    return userinfo, rest[at + 1 :]


def _credentials(userinfo: str | None) -> tuple[str | None, str | None]:
    if userinfo is None:
        return None, None
    user, sep, password = userinfo.partition(":")
    return (urllib.parse.unquote(user) or None), (urllib.parse.unquote(password) if sep else None)


def parse_redis_url(url: str) -> RedisTarget:
    """Parse ``url`` (any of the three forms); :class:`ConfigError` names the bad part."""
    shown = redact_url(url)
    if not isinstance(url, str) or "://" not in url:
        raise bad_url(shown, f"has no scheme ({EXPECTED})")
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme in STANDALONE_SCHEMES:
        return _standalone(url, shown, scheme)
    if scheme not in SENTINEL_SCHEMES + CLUSTER_SCHEMES:
        raise bad_url(shown, f"has scheme {scheme!r} ({EXPECTED})")
    userinfo, rest = _authority(shown, rest)
    username, password = _credentials(userinfo)
    rest = rest.partition("#")[0]
    rest, _, query = rest.partition("?")
    hostlist, slash, path = rest.partition("/")
    if not hostlist:
        raise bad_url(shown, "has no hosts (expected HOST[:PORT],HOST[:PORT],... after '://')")
    try:
        params = urllib.parse.parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise bad_url(shown, "has a query that is not NAME=VALUE&...") from None
    if any("=" in k for k in params):  # a value smuggled into a name would be printed as the name
        raise bad_url(shown, "has a parameter name with an encoded '=' (expected NAME=VALUE&...)")
    if scheme in CLUSTER_SCHEMES:
        if params:
            raise bad_url(shown, f"has parameter {sorted(params)[0]!r} (a cluster URL takes no parameters)")
        if path.strip("/") not in ("", "0"):
            raise bad_url(shown, f"names database {path.strip('/')!r} (a Redis Cluster has only database 0)")
        return RedisTarget(
            mode="cluster",
            url=url,
            shown=shown,
            hosts=_hosts(shown, hostlist, 6379),
            username=username,
            password=password,
            tls=scheme == "rediss+cluster",
        )
    unknown = [k for k in params if k not in _SENTINEL_PARAMS]
    if unknown:
        expected = ", ".join(_SENTINEL_PARAMS)
        raise bad_url(shown, f"has parameter {unknown[0]!r} (expected {expected})")
    segments = path.split("/") if slash else []
    if not segments or not segments[0]:
        raise bad_url(shown, "has no master name (expected redis+sentinel://HOST[:PORT],.../MASTER[/DB])")
    if len(segments) > 2 or (len(segments) == 2 and not _decimal(segments[1])):
        raise bad_url(shown, f"has path {'/' + path!r} (expected /MASTER or /MASTER/DB, DB a number)")
    return RedisTarget(
        mode="sentinel",
        url=url,
        shown=shown,
        hosts=_hosts(shown, hostlist, 26379),
        master=urllib.parse.unquote(segments[0]),
        db=int(segments[1]) if len(segments) == 2 else 0,
        username=username,
        password=password,
        sentinel_username=params.get("sentinel_username", [None])[-1],
        sentinel_password=params.get("sentinel_password", [None])[-1],
    )


def _standalone(url: str, shown: str, scheme: str) -> RedisTarget:
    """A ``redis://``, ``rediss://`` or ``unix://`` URL, refusing what redis-py would misread.

    ``redis://:pw@/0`` would go to localhost and ``redis://host/notadb`` to
    database 0; a password holding an unencoded ``/ ? #`` makes the client's
    ``urlsplit`` cut the userinfo there and connect to another host. So the
    host is read here up to the LAST ``@`` and must be the one the client sees.
    """
    userinfo, rest = _authority(shown, url.partition("://")[2])
    if "," in rest.partition("/")[0]:  # (after the userinfo: a ',' in a password is no host list)
        raise bad_url(
            shown, "names several hosts (expected redis+sentinel:// or redis+cluster:// for several)"
        )
    # The user, for what is said about it (check-store's ACL line when the server will not say
    # who it is); the client reads it from the URL itself.
    user = _credentials(userinfo)[0]
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    hostport, path = rest[:cut], rest[cut:]
    query = path.partition("?")[2].partition("#")[0]
    path = path.partition("?")[0].partition("#")[0]
    for pair in filter(None, query.split("&")):
        # Decoded as the client's parse_qs decodes them: ``?d%62=x`` is its ``db``.
        key, _, value = (urllib.parse.unquote_plus(s) for s in pair.partition("="))
        if key == "db" and not _decimal(value):
            raise bad_url(shown, f"has ?db=, but database {value!r} is not a number (expected ?db=0)")
    if scheme == "unix":
        if not path:
            raise bad_url(shown, "has no socket path (expected e.g. 'unix:///run/redis.sock')")
        return RedisTarget(mode="standalone", url=url, shown=shown, username=user)
    host = hostport
    bracketed = hostport.startswith("[")
    if bracketed:
        host, _, after = hostport[1:].partition("]")
        if after and not after.startswith(":"):
            raise bad_url(shown, f"has host {_shown_host(hostport)}, not [IPV6]:PORT")
    elif ":" in hostport:
        host = hostport.rpartition(":")[0]
    if not host:
        raise bad_url(shown, "has no host (expected e.g. 'redis://redis.internal:6379/0')")
    # redis-py percent-decodes the host it connects to: check that one.
    if problem := _host_problem(urllib.parse.unquote(host), bracketed=bracketed):
        raise bad_url(shown, problem)
    try:
        parts = urllib.parse.urlsplit(url)
        client_host = parts.hostname or ""
    except ValueError as exc:
        raise bad_url(shown, f"is not a valid URL ({exc})") from None
    if client_host.lower() != host.lower():  # the client's urlsplit must see the host seen here
        raise bad_url(shown, _RAW_DELIMITERS)
    try:
        port = parts.port
    except ValueError as exc:
        raise bad_url(shown, f"is not a valid URL ({exc})") from None
    if port == 0:
        raise bad_url(shown, "has port 0 (expected 1-65535, or none for 6379)")
    db = path.strip("/")
    if db and not _decimal(db):
        raise bad_url(shown, f"has a path, but database {db!r} is not a number (expected e.g. /0)")
    return RedisTarget(mode="standalone", url=url, shown=shown, tls=scheme == "rediss", username=user)


def redis_url_problem(url: str) -> str | None:
    """What is wrong with ``url`` (one line, redacted), or None when it parses."""
    if not isinstance(url, str):  # (the Python API's: App(redis_url=5) raised AttributeError)
        return f"{type(url).__name__} {url!r} is not a URL (expected a string such as 'redis://host:6379/0')"
    try:
        parse_redis_url(url)
    except ConfigError as exc:
        return str(exc).removeprefix(_PREFIX)
    return None


def host_port(host: str, port: int | None) -> str:
    """``host:port`` as a URL writes it (an IPv6 address in brackets); a socket path alone."""
    if port is None:
        return host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def userinfo_shown(shown: str) -> str:
    """The (redacted) userinfo of a shown URL with its ``@``, or ``""``: to carry into a suggested URL."""
    rest = shown.partition("://")[2]
    at = rest.rfind("@")  # the LAST '@', as the parser and redact_url cut it
    return rest[: at + 1] if at >= 0 else ""


def _names(masters: list[str] | None) -> str:
    if masters is None:
        return ""
    shown = [repr(printable(m, 40)) for m in masters[:10]] + (["..."] if len(masters) > 10 else [])
    return f" (it monitors: {', '.join(shown) or 'no master'})"


def wrong_kind(
    address: str, kind: str, *, tls: bool = False, userinfo: str = "", masters: list[str] | None = None
) -> str:
    """One line for a URL that reached a server of another kind: what ``address`` is, the URL to use.

    ``kind``: the server's ``redis_mode`` (``cluster``, ``sentinel`` or ``standalone``);
    ``userinfo``: the shown URL's (redacted) userinfo with its ``@``, carried into the
    suggestion; ``masters``: what a sentinel monitors (None: unknown). A sentinel that
    monitors exactly one master gets its name in the suggestion.
    """
    if kind == "cluster":
        return f"{address} is a Redis Cluster node: use {'rediss' if tls else 'redis'}+cluster://{userinfo}{address}"
    if kind == "sentinel":
        one = masters is not None and len(masters) == 1
        name = urllib.parse.quote(printable(masters[0], 40), safe="") if one and masters else "MASTER"
        return f"{address} is a Redis Sentinel: use redis+sentinel://{address}/{name}{_names(masters)}"
    return (
        f"{address} is a standalone Redis server, not a cluster node or a sentinel: "
        f"use {'rediss' if tls else 'redis'}://{userinfo}{address}"
    )
