"""``quorum-cron check-store URL``: is this Redis one quorum-cron can run on, and how is it set up?

One line per check, each ``ok``, ``note`` or ``PROBLEM``, and exit 1 when
any is a problem (0 otherwise; a bad URL or option is one ``error: ...``
line and exit 1, as for every command):

- **server**: product, version and mode against the support matrix
  (:mod:`quorum_cron.store.server`; the agent refuses the same servers);
- **mode**: the URL's kind agrees with the server's (a ``redis://`` URL at a
  cluster node or at a Sentinel, a ``redis+cluster://`` URL at anything but
  cluster nodes, a ``redis+sentinel://`` URL at anything but sentinels is a
  problem), named with the URL to use (:mod:`quorum_cron.store.connect`
  refuses such a connection; the line is its reason);
- **role**: a replica (read-only) is a problem: point at the master;
- **eviction**: ``maxmemory-policy`` must be ``noeviction``;
- **acl**: the connected user (``ACL WHOAMI``) and whether it may run every
  command quorum-cron sends. With ``--acl-user NAME`` (on an admin URL) each
  is asked with ``ACL DRYRUN``, writes included; else the connected user's
  read-only commands are tried (nothing written) and the writes are named
  as unchecked;
- **auth**: a note when the URL gives a password the server does not check
  (it lets clients in without one: :mod:`quorum_cron.store.passwords`);
- **tls**: whether the URL uses TLS;
- **replicas**: connected replicas (on a cluster, the fewest of any master),
  the largest ``wait_replicas`` that can succeed.

Nothing is written to the server. What the server answers is only printed
(control characters replaced), never acted on.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from quorum_cron.errors import ConfigError, StoreError
from quorum_cron.store.connect import NotClusterNodes, WrongServerKind
from quorum_cron.store.sentinels import NotSentinels
from quorum_cron.store.server import (
    ServerInfo,
    ServerProbe,
    credentials_hint,
    eviction_problem,
    not_redis_problem,
    parse_server_info,
    unsupported,
)
from quorum_cron.store.urls import RedisTarget, host_port, parse_redis_url

__all__ = ["check_store", "required_commands"]

PROBE_KEY = "qc:{check-store}:probe"
"""A key and channel in quorum-cron's ``qc:*`` namespace that nothing uses: probes and DRYRUNs name it."""

_NO_SHA = "0" * 40

_READS: tuple[tuple[str, ...], ...] = (
    ("PING",),
    ("TIME",),
    ("INFO", "server"),
    ("TYPE", PROBE_KEY),
    ("GET", PROBE_KEY),
    ("HGET", PROBE_KEY, "f"),
    ("HMGET", PROBE_KEY, "f"),
    ("HGETALL", PROBE_KEY),
    ("ZRANGE", PROBE_KEY, "0", "-1"),
    ("ZRANGEBYSCORE", PROBE_KEY, "0", "1"),
    ("XREVRANGE", PROBE_KEY, "+", "-", "COUNT", "1"),
    ("EVALSHA", _NO_SHA, "1", PROBE_KEY),  # NOSCRIPT when allowed, NOPERM when not
    ("PUBLISH", PROBE_KEY, "0"),  # a channel nobody listens on: 0 receivers
)
"""Commands tried as the connected user: none writes (the PUBLISH reaches no subscriber)."""

_WRITES: tuple[tuple[str, ...], ...] = (
    ("SET", PROBE_KEY, "1"),
    ("DEL", PROBE_KEY),
    ("PEXPIRE", PROBE_KEY, "1000"),
    ("HSET", PROBE_KEY, "f", "1"),
    ("HDEL", PROBE_KEY, "f"),
    ("ZADD", PROBE_KEY, "1", "m"),
    ("ZREM", PROBE_KEY, "m"),
    ("ZREMRANGEBYRANK", PROBE_KEY, "0", "0"),
    ("ZREMRANGEBYSCORE", PROBE_KEY, "0", "1"),
    ("XADD", PROBE_KEY, "*", "f", "1"),
    ("XREAD", "COUNT", "1", "STREAMS", PROBE_KEY, "0"),
    ("WAIT", "0", "0"),
    ("EVAL", "return 1", "0"),
    ("SCRIPT", "LOAD", "return 1"),
    ("SUBSCRIBE", PROBE_KEY),
    ("UNSUBSCRIBE", PROBE_KEY),
)
"""The rest, asked only with ACL DRYRUN (never run)."""

_CLUSTER: tuple[tuple[str, ...], ...] = (
    ("SPUBLISH", PROBE_KEY, "0"),
    ("SSUBSCRIBE", PROBE_KEY),
    ("SUNSUBSCRIBE", PROBE_KEY),
    ("CLUSTER", "SLOTS"),
    ("COMMAND",),
    ("ASKING",),
)


def required_commands(cluster: bool, api: tuple[int, int, int] | None) -> list[tuple[str, ...]]:
    """Every command (with sample arguments) quorum-cron's user must be allowed, for ACL DRYRUN.

    ``api`` is the server's Redis API level (``redis_version``; Valkey says
    7.2.4): from 7.2 redis-py sends ``CLIENT SETINFO`` on every connection.
    """
    out = [*_READS, *_WRITES, *(_CLUSTER if cluster else ())]
    if api is not None and api >= (7, 2, 0):
        out.append(("CLIENT", "SETINFO", "LIB-NAME", "redis-py"))
    return out


def _line(status: str, what: str, text: str) -> None:
    safe = "".join(ch if ch.isprintable() else "?" for ch in text)
    click.echo(f"{status:<8}{what:<10}{safe}")


Api = tuple[int, int, int] | None


def _acl(probe: ServerProbe, target: RedisTarget, api: Api, user: str | None) -> list[str]:
    """Print the ACL lines; return the problems."""
    whoami = probe.whoami() or target.username or "default"  # no +acl|whoami: the URL's user
    cluster = target.mode == "cluster"
    if user is None and probe.may_dryrun(whoami):
        user = whoami  # an admin checking itself: ACL DRYRUN covers the writes too
    if user is not None:
        refused = []
        for cmd in required_commands(cluster, api):
            try:
                reply = probe.dryrun(user, cmd)
            except StoreError as exc:
                first = str(exc).split("\n", 1)[0][:200]
                if f"User '{user}' not found" in first:  # (the server's own words; an admin asked)
                    why = f"user {user} does not exist on this server (expected a user ACL LIST names)"
                else:
                    why = f"ACL DRYRUN as {whoami} failed ({first}): --acl-user needs an admin URL"
                _line("PROBLEM", "acl", why)
                return ["acl"]
            if reply != "OK":
                refused.append(" ".join(cmd[:2]) if cmd[0] in ("CLIENT", "CLUSTER", "SCRIPT") else cmd[0])
        if refused:
            why = f"user {user} may not run {', '.join(refused)}: see docs/operations.md ACL"
            _line("PROBLEM", "acl", why)
            return ["acl"]
        _line("ok", "acl", f"user {user} may run every command quorum-cron sends (ACL DRYRUN)")
        return []
    refused = [cmd[0] for cmd in _READS + (_CLUSTER[:1] if cluster else ()) if not probe.allowed(cmd)]
    if refused:
        _line("PROBLEM", "acl", f"user {whoami} may not run {', '.join(refused)}: see docs/operations.md ACL")
        return ["acl"]
    _line(
        "ok",
        "acl",
        f"user {whoami} may run the read commands; writes unchecked (nothing is written): to check them, "
        f"run check-store on an admin URL with --acl-user {whoami}",
    )
    return []


def _replicas(probe: ServerProbe, target: RedisTarget) -> list[str]:
    try:
        nodes = probe.replication()
    except StoreError as exc:
        _line("note", "replicas", f"unknown (INFO replication: {str(exc)[:120]})")
        return []
    masters = [n for n in nodes if str(n.get("role", "master")) == "master"]
    if target.mode != "cluster" and nodes and not masters:
        _line("PROBLEM", "role", "this server is a replica (read-only): point the URL at the master")
        return ["role"]
    have = min((int(n.get("connected_slaves", 0)) for n in masters), default=0)
    where = " (the fewest of any master)" if target.mode == "cluster" else ""
    _line("ok", "replicas", f"{have} connected{where}: wait_replicas may be 0..{have}")
    return []


@click.command("check-store")
@click.argument("url", envvar="QUORUM_CRON_REDIS_URL", metavar="URL")
@click.option(
    "--acl-user",
    metavar="NAME",
    help="Check this ACL user's rights with ACL DRYRUN (the URL must be an admin's).",
)
def check_store(url: str, acl_user: str | None) -> None:
    """Check a Redis server for quorum-cron: version, mode, eviction policy, ACL rights, TLS, replicas."""
    try:
        target = parse_redis_url(url)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    problems: list[str] = []
    try:
        probe = ServerProbe(target, timeout_s=5.0)
    except NotClusterNodes as exc:  # a cluster URL whose seeds are no cluster nodes: the URL is wrong
        probe, problems = None, ["mode"]
        _line("PROBLEM", "mode", str(exc))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    except StoreError as exc:
        probe, problems = None, _unreachable(target, exc)
    if probe is not None:
        try:
            problems = _check(probe, target, acl_user)
        except StoreError as exc:
            problems = _unreachable(target, exc)
        finally:
            probe.close()
    if problems:
        click.echo(f"{len(problems)} problem(s): {', '.join(problems)}")
        sys.exit(1)
    click.echo("quorum-cron can run on this server")


def _unreachable(target: RedisTarget, exc: StoreError) -> list[str]:
    not_redis = not_redis_problem(target.shown, exc)  # (it answered, in another protocol: not down)
    if not_redis is not None:
        _line("PROBLEM", "connect", not_redis)
        return ["connect"]
    first = str(exc).split("\n", 1)[0][:300]
    _line("PROBLEM", "connect", f"redis at {target.shown}: {first}{credentials_hint(first)}")
    return ["connect"]


def _check(probe: ServerProbe, target: RedisTarget, acl_user: str | None) -> list[str]:
    problems: list[str] = []
    try:
        probe.ping()
    except StoreError as exc:
        wrong = exc.__cause__
        if isinstance(wrong, WrongServerKind):  # refused as it connected: a cluster node or a Sentinel
            return _wrong_kind(wrong, target)
        if isinstance(wrong, NotSentinels):
            _line("PROBLEM", "mode", str(wrong))
            return ["mode"]
        raise
    server: ServerInfo = probe.server()
    refusal = unsupported(server, target.shown)
    if refusal is not None:
        _line("PROBLEM", "server", refusal)
        problems.append("server")
    else:
        _line("ok", "server", f"{server} at {target.shown}")
    problems += _mode(server, target)
    if server.mode == "sentinel":
        return problems  # a Sentinel holds no data: the other checks would describe the wrong server
    policies = probe.memory_policies()
    policy = (
        policies[0] if policies else None
    )  # a cluster: the first node's (the agent reports an evicting one)
    if policy is None:
        _line("note", "eviction", "maxmemory-policy unreadable (no INFO?): the agent starts unchecked")
    else:
        problem = eviction_problem(str(policy), target.shown)
        _line("PROBLEM" if problem else "ok", "eviction", problem or f"maxmemory-policy {policy}")
        problems += ["eviction"] if problem else []
    problems += _acl(probe, target, server.api, acl_user)
    unguarded = probe.unguarded(target.shown)  # (a note: the agent runs, and warns the same)
    if unguarded is not None:
        _line("note", "auth", unguarded)
    if target.tls:
        _line("ok", "tls", "TLS (rediss://): the server's certificate was verified")
    else:
        _line("note", "tls", "plain TCP: use rediss:// when the network to Redis is not trusted")
    problems += _replicas(probe, target)
    return problems


def _wrong_kind(wrong: WrongServerKind, target: RedisTarget) -> list[str]:
    """The server and mode lines of a standalone URL whose server is a cluster node or a Sentinel."""
    server = parse_server_info(wrong.info)
    refusal = unsupported(server, target.shown)
    _line("PROBLEM" if refusal else "ok", "server", refusal or f"{server} at {target.shown}")
    kind = "a Redis Cluster node" if wrong.mode == "cluster" else "a Sentinel"
    _line("PROBLEM", "mode", f"this server is {kind}: {wrong.suggestion}")
    return ["server", "mode"] if refusal else ["mode"]


def _mode(server: ServerInfo, target: RedisTarget) -> Sequence[str]:
    # (A standalone URL at a cluster node or a Sentinel, a cluster URL at anything else, are refused
    # as they connect: see _wrong_kind and check_store. These lines are for what passed unchecked.)
    seeds = ",".join(host_port(h, p) for h, p in target.hosts) or "HOST[:PORT]"
    if server.mode == "sentinel":
        _line("PROBLEM", "mode", f"this server is a Sentinel: use redis+sentinel://{seeds}/MASTER")
        return ["mode"]
    if server.mode == "cluster" and target.mode != "cluster":
        _line("PROBLEM", "mode", "this server is a Redis Cluster node: use redis+cluster://HOST[:PORT],...")
        return ["mode"]
    if target.mode == "cluster" and server.mode != "cluster":
        _line("PROBLEM", "mode", f"this server runs {server.mode}, not a cluster: use redis://{seeds}")
        return ["mode"]
    via = " (master found through Sentinel)" if target.mode == "sentinel" else ""
    _line("ok", "mode", f"{server.mode}{via}")
    return []
