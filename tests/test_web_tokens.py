"""Admin tokens of the web face: who may act, through the check itself and through the app.

The bugs these tests pin were found by planting them (tests/mutation/):
the first one survived the whole suite. An unknown name with an empty
secret (``Authorization: Bearer nobody:``) must not pass as a token whose
secret is the empty string; a session opened with a secret must end when
the file gives that name another one; the environment's token counts next
to the file's. The app runs through Starlette's TestClient on the session's
real redis-server, with the store on an injected clock.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis
from starlette.testclient import TestClient

from quorum_cron.config.settings import ClusterConfig, Config, JobSpec
from quorum_cron.errors import ConfigError
from quorum_cron.store.redis import RedisStore
from quorum_cron.web.app import WebContext, create_app
from quorum_cron.web.tokens import AdminTokens, parse_token

T0 = 1_800_000_000_000
ALICE = "alice:correct-horse-battery-staple"
BOB = "bob:another-long-secret-value"
ORIGIN = {"Origin": "http://testserver"}
# An unknown name with no secret, or with a secret that an unset entry could be taken to have.
UNKNOWN = ("nobody:", "nobody: ", "alice2:", "nobody:correct-horse-battery-staple")


def _tokens_file(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "tokens"
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def _app(client: redis.Redis, tokens: AdminTokens) -> tuple[RedisStore, TestClient]:
    store = RedisStore(client, "tok", clock=lambda: T0)
    job = JobSpec.create("tick", "@every 10s", command=("true",))
    config = Config(ClusterConfig(namespace="tok", size=3), (job,))
    return store, TestClient(create_app(WebContext(config, store, "redis://x/0", tokens)))


def test_an_unknown_name_is_refused_whatever_its_secret(tmp_path: Path) -> None:
    tokens = AdminTokens(file=_tokens_file(tmp_path, "# operators", ALICE))
    for presented in (*UNKNOWN, "alice:", "alice: ", ":"):
        assert tokens.check(presented) is None, presented
    assert tokens.check(ALICE) == "alice"
    env_only = AdminTokens(env_value=ALICE)
    for presented in UNKNOWN:
        assert env_only.check(presented) is None, presented


def test_the_api_refuses_an_unknown_name_with_an_empty_secret_and_records_nothing(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    store, app = _app(redis_client, AdminTokens(file=_tokens_file(tmp_path, ALICE)))
    with app as client:
        for presented in UNKNOWN:
            headers = {"Authorization": f"Bearer {presented}"}
            for action in ("trigger", "pause", "resume"):
                r = client.post(f"/api/jobs/tick/{action}", headers=headers, json={"reason": "x"})
                assert r.status_code == 403, (presented, action, r.text)
            login = client.post("/login", data={"token": presented}, headers=ORIGIN, follow_redirects=False)
            assert login.status_code == 403, presented
    assert store.audit("tick", 10) == []
    assert store.triggers("tick", 0) == []
    assert not store.control("tick").paused


def test_a_session_ends_when_its_name_gets_another_secret(redis_client: redis.Redis, tmp_path: Path) -> None:
    path = _tokens_file(tmp_path, ALICE)
    tokens = AdminTokens(file=path)
    digest = AdminTokens.digest_of(ALICE)
    assert tokens.still_valid("alice", digest)
    store, app = _app(redis_client, tokens)
    with app as client:
        login = client.post("/login", data={"token": ALICE}, headers=ORIGIN, follow_redirects=False)
        assert login.status_code == 303
        page = client.get("/jobs/tick").text
        marker = 'name="csrf" value="'
        csrf = page[page.index(marker) + len(marker) :].split('"', 1)[0]
        path.write_text("alice:a-new-secret-after-the-leak\n")  # rotated: same name, new secret
        assert not tokens.still_valid("alice", digest)
        r = client.post("/jobs/tick/pause", data={"csrf": csrf, "reason": "x"}, headers=ORIGIN)
        assert r.status_code == 403, r.text
    assert store.audit("tick", 10) == [] and not store.control("tick").paused


def test_the_environment_token_counts_next_to_the_file(tmp_path: Path) -> None:
    tokens = AdminTokens(file=_tokens_file(tmp_path, ALICE), env_value=BOB)
    assert tokens.check(ALICE) == "alice"
    assert tokens.check(BOB) == "bob"
    assert sorted(tokens.current()) == ["alice", "bob"]


def test_a_name_given_twice_is_refused_naming_both_places(tmp_path: Path) -> None:
    """The last line used to win silently: an operator who appended a new secret for ``alice``
    believed the old one still worked (or was revoked); the audit's ``by`` could not tell them
    apart."""
    path = _tokens_file(tmp_path, ALICE, BOB, "alice:a-second-secret-for-alice")
    where = re.escape(str(path))
    twice = rf"admin token name 'alice' appears twice \({where}:1 and {where}:3\)"
    with pytest.raises(ConfigError, match=twice):
        AdminTokens.from_environment(path)
    assert AdminTokens(file=path).check(ALICE) is None  # (edited after start: every token refused)
    with pytest.raises(ConfigError, match=rf"'bob' appears twice \(\$QUORUM_CRON_WEB_TOKEN and {where}:2\)"):
        AdminTokens(file=path, env_value=BOB).current()


def test_a_secret_needs_sixteen_characters() -> None:
    assert parse_token("alice:" + "x" * 16, "test")[0] == "alice"
    with pytest.raises(ConfigError, match=r"admin token 'alice' in test: secret has 15 characters"):
        parse_token("alice:" + "x" * 15, "test")


def test_no_secret_or_session_in_the_reprs(
    redis_client: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``AdminTokens`` was a plain dataclass: its repr printed ``env_value='bob:...'`` whole, and the
    ``WebContext`` holding it printed that and every live session id (a login cookie), its CSRF
    token and its secret's digest. A debug line or an error report would have handed them out."""
    monkeypatch.delenv("QUORUM_CRON_WEB_TOKEN_FILE", raising=False)
    monkeypatch.setenv("QUORUM_CRON_WEB_TOKEN", BOB)
    tokens = AdminTokens.from_environment(_tokens_file(tmp_path, ALICE))
    assert tokens.env_value == BOB and "tokens" in repr(tokens)  # (the file is still named)
    store = RedisStore(redis_client, "tok", clock=lambda: T0)
    job = JobSpec.create("tick", "@every 10s", command=("true",))
    ctx = WebContext(Config(ClusterConfig(namespace="tok", size=3), (job,)), store, "redis://x/0", tokens)
    with TestClient(create_app(ctx)) as client:
        login = client.post("/login", data={"token": ALICE}, headers=ORIGIN, follow_redirects=False)
        assert login.status_code == 303
    ((sid, session),) = ctx.sessions.items()
    shown = repr(ctx) + repr(tokens) + repr(session)
    for secret in (BOB, BOB.partition(":")[2], ALICE.partition(":")[2], sid, session.csrf, session.digest):
        assert secret not in shown, (secret, shown)
    assert "alice" in repr(session)  # who it is stays visible
