"""Config loading: defaults, every refusal and its one-line message, secrets, spec_hash."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from quorum_cron.config.file import load_config, parse_config
from quorum_cron.config.settings import ClusterConfig, Config, InvalidConfig, JobSpec, redact_url
from quorum_cron.errors import ConfigError
from quorum_cron.store.base import Delivery, Overlap
from quorum_cron.store.embedded.single import EmbeddedRedis

EXAMPLES = Path(__file__).parents[1] / "examples"

MINIMAL = """
[cluster]
name = "prod"
size = 3

[[jobs]]
name = "backup"
schedule = "30 2 * * *"
command = ["/bin/backup"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(textwrap.dedent(text))
    return path


def errors_of(tmp_path: Path, text: str) -> tuple[str, ...]:
    with pytest.raises(InvalidConfig) as info:
        load_config(write(tmp_path, text))
    for line in info.value.errors:
        assert "\n" not in line
    return info.value.errors


def only_error(tmp_path: Path, text: str) -> str:
    errors = errors_of(tmp_path, text)
    assert len(errors) == 1, errors
    return errors[0]


def test_example_loads() -> None:
    config = load_config(EXAMPLES / "cluster.toml")
    assert config.cluster.namespace == "billing-prod"
    assert (config.cluster.size, config.cluster.quorum) == (3, 2)
    assert [j.name for j in config.jobs] == [
        "nightly-backup",
        "invoice-run",
        "cache-warm",
        "queue-depth-probe",
    ]
    backup = config.job("nightly-backup")
    assert backup.timezone == "Europe/Berlin" and backup.schedule_expr == "30 2 * * *"
    assert backup.starting_deadline_ms == 300_000 and backup.retries == 2 and backup.misfire == "run-once"
    assert config.job("queue-depth-probe").schedule.period_ms == 90_000
    assert config.job("invoice-run").env == {"BILLING_ENV": "production"}


def test_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, MINIMAL))
    c = config.cluster
    assert (c.quorum, c.max_skew_ms, c.lease_ms, c.start_timeout_ms, c.heartbeat_ms) == (
        2,
        250,
        15_000,
        5_000,
        2_000,
    )
    assert (c.retention_ms, c.ledger_maxlen, c.clock_check_interval_ms) == (7 * 86_400_000, 10_000, 60_000)
    assert (c.ntp_servers, c.ntp_unreachable, c.alert_command, c.redis_url) == ((), "store-time", None, None)
    job = config.job("backup")
    assert job.timeout_ms == 3_600_000 and job.starting_deadline_ms == 60_000
    assert job.overlap is Overlap.FORBID and job.delivery is Delivery.AT_MOST_ONCE
    assert (job.misfire, job.dst, job.retries, job.retry_backoff_ms) == ("skip", "once", 0, 10_000)
    assert job.on_store_unavailable == "skip" and job.timezone == "UTC" and dict(job.env) == {}
    assert config.source.endswith("c.toml")


def test_default_deadline_is_half_the_shortest_interval_below_two_minutes() -> None:
    assert JobSpec.create("a", "@every 30s", command=["x"]).starting_deadline_ms == 15_000
    assert JobSpec.create("a", "*/20 * * * * *", command=["x"]).starting_deadline_ms == 10_000
    assert JobSpec.create("a", "* * * * *", command=["x"]).starting_deadline_ms == 30_000
    assert JobSpec.create("a", "0 * * * *", command=["x"]).starting_deadline_ms == 60_000


@pytest.mark.parametrize(
    ("size", "quorum"),
    [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3)],
)
def test_default_quorum_is_majority(size: int, quorum: int) -> None:
    assert ClusterConfig(namespace="n", size=size).quorum == quorum


def test_namespace_key_alias(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, MINIMAL.replace('name = "prod"', 'namespace = "prod"')))
    assert config.cluster.namespace == "prod"


CASES = [
    # (replace this, with this, expected message fragment)
    (
        "size = 3",
        "size = 3\nquorum = 1",
        "cluster: field 'quorum': 1 is not a majority of size 3 (expected 2 to 3)",
    ),
    ("size = 3", "size = 3\nquorum = 4", "field 'quorum': 4 is not a majority of size 3"),
    ("size = 3", "size = 0", "cluster: field 'size': 0 is out of range (expected 1 to 100)"),
    ("size = 3", 'size = "3"', "cluster: field 'size': '3' is a string (expected an integer 1-100)"),
    ("size = 3", "size = true", "field 'size': True is a boolean"),
    (
        "size = 3\n",
        "",
        "cluster: field 'size': missing (expected size = N (1-100), or members = ['a', 'b', 'c'])",
    ),
    ('name = "prod"', 'name = "my prod"', "cluster: field 'name': 'my prod' is not a valid namespace"),
    ('name = "prod"', 'name = "a"\nnamespace = "a"', "field 'namespace': given together with 'name'"),
    ("size = 3", "size = 3\nsize_ = 1", "cluster: field 'size_': unknown key (did you mean 'size'?)"),
    (
        "size = 3",
        'size = 3\nmax_skew = "5 parsecs"',
        "cluster: field 'max_skew': '5 parsecs' is not a duration",
    ),
    (
        "size = 3",
        'size = 3\nlease = "1s"\nheartbeat = "2s"',
        "field 'heartbeat': '2s' is more than half of lease '1s'",
    ),
    (
        "size = 3",
        'size = 3\nretention = "1m"',
        "field 'retention': '1m' is out of range (expected 1h to 366d)",
    ),
    (
        "size = 3",
        'size = 3\nntp_unreachable = "panic"',
        "field 'ntp_unreachable': 'panic' is not one of 'abstain', 'store-time'",
    ),
    (
        "size = 3",
        'size = 3\nntp_servers = ["pool.ntp.org", "time server"]',
        "field 'ntp_servers': invalid NTP server 'time server': 'time server' is not a host name or IP",
    ),
    (
        "size = 3",
        'size = 3\nntp_servers = ["ntp:abc"]',
        "field 'ntp_servers': invalid NTP server 'ntp:abc': port 'abc' is not a number from 1 to 65535",
    ),
    (  # '²'.isdigit() is true and int('²') raised: a traceback from validate
        "size = 3",
        'size = 3\nntp_servers = ["ntp:²", "[::1]:¹²³"]',
        "field 'ntp_servers': invalid NTP server 'ntp:²': port '²' is not a number from 1 to 65535",
    ),
    (
        "size = 3",
        'size = 3\nntp_servers = ["[::1]:¹²³"]',
        "invalid NTP server '[::1]:¹²³': port '¹²³' is not a number from 1 to 65535",
    ),
    (
        "size = 3",
        'size = 3\nntp_servers = "pool.ntp.org"',
        "field 'ntp_servers': 'pool.ntp.org' is a string (expected an array",
    ),
    (
        "size = 3",
        'size = 3\nredis_url = "http://:hunter2@r:6379"',
        "field 'redis_url': 'http://:***@r:6379' has scheme 'http'",
    ),
    ("size = 3", 'size = 3\nredis_url = "redis://:hunter2@:6379"', "'redis://:***@:6379' has no host"),
    (
        "size = 3",
        'size = 3\nalert_url = "ftp://x/hook"',
        "field 'alert_url': 'ftp://x/***' is not an http(s) URL",
    ),
    (
        "size = 3",
        'size = 3\nalert_url = "https://user:hunter2@hooks.example/T/secret"',
        "field 'alert_url': 'https://hooks.example/***' has a user or password before its host",
    ),
    (
        "size = 3",
        'size = 3\nalert_url = "https://hooks.example:99999/T/secret"',
        "field 'alert_url': 'https://hooks.example/***' is not a valid URL (Port out of range",
    ),
    # Without a scheme the value was shown as '://' or ':///***', naming nothing the user wrote.
    ("size = 3", 'size = 3\nalert_url = ""', "field 'alert_url': '' is not an http(s) URL"),
    (
        "size = 3",
        'size = 3\nalert_url = "hooks.example/T/secret"',
        "field 'alert_url': 'hooks.example/***' is not an http(s) URL",
    ),
    (
        "size = 3",
        'size = 3\nalert_url = "https:// hooks.example/T/secret"',
        "field 'alert_url': 'https:// hooks.example/***' contains whitespace or a control character",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "*/0 * * * *"',
        "job 'backup': field 'schedule': invalid cron expression '*/0 * * * *': step must be >= 1",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "@reboot"',
        "job 'backup': field 'schedule': invalid schedule '@reboot'",
    ),
    ('schedule = "30 2 * * *"\n', "", "job 'backup': field 'schedule': missing"),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2 * * *"\ntimezone = "Mars/Olympus"',
        "job 'backup': field 'timezone': invalid timezone 'Mars/Olympus': expected an IANA name",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2 * * *"\ntimeout = "5 parsecs"',
        "job 'backup': field 'timeout': '5 parsecs' is not a duration (expected e.g. '30s', '5m'",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2 * * *"\ntimeout = "0s"',
        "field 'timeout': '0s' is out of range",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2 * * *"\ntimout = "1h"',
        "field 'timout': unknown key (did you mean 'timeout'?)",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2\\n* * *"',
        "job 'backup': field 'schedule': invalid schedule '30 2\\n* * *': contains '\\n' (expected one line",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2 * * *"\ntimezone = ""',
        "job 'backup': field 'timezone': invalid timezone ''",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2 * * *"\ncwd = "/srv/\\u0000x"',
        "job 'backup': field 'cwd': '/srv/\\x00x' contains a NUL character",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2 * * *"\nenv = {A = "x\\u0000y"}',
        "job 'backup': field 'env': value of 'A' contains a NUL character",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2 * * *"\nshell = "backup"',
        "job 'backup': field 'command': both 'command' and 'shell' given (expected exactly one)",
    ),
    (
        'command = ["/bin/backup"]',
        "",
        "job 'backup': field 'command': missing (expected 'command' = argv list, or 'shell' = string)",
    ),
    (
        'command = ["/bin/backup"]',
        'command = "/bin/backup"',
        "field 'command': '/bin/backup' is a string (expected an array",
    ),
    ('command = ["/bin/backup"]', "command = []", "field 'command': [] is an empty list (expected 1-1000"),
    (
        'command = ["/bin/backup"]',
        'command = ["/bin/backup", 3]',
        "field 'command': element 3 is not a non-empty string",
    ),
    (  # It is a non-empty string: the line said it was not, hiding the NUL.
        'command = ["/bin/backup"]',
        'command = ["/bin/backup", "a\\u0000b"]',
        "field 'command': element 'a\\x00b' contains a NUL character",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2 * * *"\noverlap = "skip"',
        "field 'overlap': 'skip' is not one of 'allow', 'forbid', 'replace'",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2 * * *"\ndelivery = "exactly-once"',
        "field 'delivery': 'exactly-once' is not one of",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2 * * *"\nmisfire = "all"',
        "field 'misfire': 'all' is not one of 'skip', 'run-once'",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2 * * *"\ndst = "twice"',
        "field 'dst': 'twice' is not one of 'once', 'every'",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2 * * *"\nretries = -1',
        "field 'retries': -1 is out of range (expected 0 to 100)",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2 * * *"\non_store_unavailable = "panic"',
        "field 'on_store_unavailable'",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2 * * *"\nenv = { "1BAD" = "x" }',
        "field 'env': '1BAD' is not a valid environment variable name",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2 * * *"\nenv = { A = 1 }',
        "field 'env': value of 'A' is an integer (expected a string)",
    ),
    (
        'schedule = "30 2 * * *"',
        'schedule = "30 2 * * *"\nstarting_deadline = "100ms"',
        "job 'backup': field 'starting_deadline': '100ms' must be longer than cluster max_skew '250ms'",
    ),
    ('name = "backup"', 'name = "back up"', "job 'back up': field 'name': 'back up' is not a valid job name"),
    ('name = "backup"', 'name = "' + "x" * 101 + '"', "is not a valid job name (expected 1-100 characters"),
    ('name = "backup"\n', "", "jobs #1: field 'name': missing"),
]


@pytest.mark.parametrize(("old", "new", "fragment"), CASES)
def test_each_bad_value_is_refused_with_its_message(
    tmp_path: Path, old: str, new: str, fragment: str
) -> None:
    assert old in MINIMAL
    message = only_error(tmp_path, MINIMAL.replace(old, new, 1))
    assert message.startswith(str(tmp_path / "c.toml") + ": ")
    assert fragment in message


def test_password_never_in_messages(tmp_path: Path) -> None:
    message = only_error(tmp_path, MINIMAL.replace("size = 3", 'size = 3\nredis_url = "http://u:hunter2@r"'))
    assert "hunter2" not in message
    # A raw '/' or '#' in a Sentinel or Cluster password: it was printed as a "path" or a "host".
    for url in ("redis+sentinel://admin:hunter2/Zz@s1/m", "redis+cluster://:hunter2#Zz@n1"):
        message = only_error(tmp_path, MINIMAL.replace("size = 3", f'size = 3\nredis_url = "{url}"'))
        assert "hunter2" not in message and "percent-encoded" in message, message


def test_collects_all_errors(tmp_path: Path) -> None:
    errors = errors_of(tmp_path, (EXAMPLES / "invalid.toml").read_text())
    assert len(errors) == 7
    assert any("field 'quorum'" in e for e in errors) and any("field 'timout'" in e for e in errors)
    with pytest.raises(InvalidConfig, match=r"\(and 6 more\)$"):
        load_config(EXAMPLES / "invalid.toml")


def test_duplicate_job_names(tmp_path: Path) -> None:
    message = only_error(tmp_path, MINIMAL + MINIMAL.split("\n\n", 1)[1].replace("[cluster]", ""))
    assert "job 'backup': field 'name': duplicate job name (jobs #1 and #2)" in message


def test_unknown_top_level_key_and_missing_cluster(tmp_path: Path) -> None:
    errors = errors_of(tmp_path, '[[job]]\nname = "x"\n')
    assert any("field 'job': unknown key (did you mean 'jobs'?)" in e for e in errors)
    assert any("field 'cluster': missing (expected a [cluster] table)" in e for e in errors)


@pytest.mark.parametrize("alias", ["cmd", "commands", "exec", "run"])
def test_a_jobs_command_under_another_name_is_suggested_as_command(tmp_path: Path, alias: str) -> None:
    # `cmd = ["true"]` got "did you mean 'cwd'?": the spelling is close, the meaning is `command`.
    text = MINIMAL.replace('command = ["/bin/backup"]', f'{alias} = ["true"]')
    errors = errors_of(tmp_path, text)
    assert f"c.toml: job 'backup': field {alias!r}: unknown key (did you mean 'command'?)" in [
        e.split("/")[-1] for e in errors
    ], errors


def test_the_command_aliases_are_only_for_job_keys(tmp_path: Path) -> None:
    errors = errors_of(tmp_path, MINIMAL.replace("size = 3", 'size = 3\nrun = "x"'))
    assert any("field 'run': unknown key (expected one of " in e for e in errors), errors


def test_file_problems(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml: no such file$"):
        load_config(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)
    bad = write(tmp_path, '[cluster]\nname = "x"\nsize = \n')
    with pytest.raises(ConfigError, match=r"c\.toml: invalid TOML: .*\(at line 3, column 8\)"):
        load_config(bad)
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(bad)


def test_job_lookup_lists_known_names(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, MINIMAL))
    with pytest.raises(ConfigError, match=r"no job named 'nope' \(known jobs: backup\)"):
        config.job("nope")


def test_redis_password_not_in_repr() -> None:
    cluster = ClusterConfig(namespace="n", size=3, redis_url="redis://user:hunter2@r:6379/0")
    assert "hunter2" not in repr(cluster)
    assert "redis://user:***@r:6379/0" in repr(cluster)
    assert cluster.redis_url == "redis://user:hunter2@r:6379/0"
    assert cluster.redacted_redis_url == "redis://user:***@r:6379/0"
    assert (
        redact_url("unix:///run/redis.sock?db=0&password=hunter2")
        == "unix:///run/redis.sock?db=0&password=***"
    )
    assert redact_url("redis://r:6379") == "redis://r:6379"
    hooked = ClusterConfig(namespace="n", size=1, alert_url="https://hooks.example/T000/B000/secret")
    assert "secret" not in repr(hooked)


def test_in_process_jobs_only_from_code(tmp_path: Path) -> None:
    job = JobSpec.create("py", "@hourly", in_process=True)
    assert job.command is None and job.shell is None
    with pytest.raises(ConfigError, match="neither of 'command' and 'shell' given"):
        JobSpec.create("py", "@hourly")
    with pytest.raises(ConfigError, match="an in-process job has neither"):
        JobSpec.create("py", "@hourly", in_process=True, shell="x")
    message = only_error(
        tmp_path, MINIMAL.replace('schedule = "30 2 * * *"', 'schedule = "30 2 * * *"\nin_process = true')
    )
    assert "field 'in_process': unknown key" in message


def test_constructor_validates_too() -> None:
    with pytest.raises(ConfigError, match=r"job 'j': field 'timeout'"):
        JobSpec.create("j", "@hourly", command=["x"], timeout_ms=0)
    with pytest.raises(ConfigError, match="field 'quorum': 1 is not a majority of size 3"):
        ClusterConfig(namespace="n", size=3, quorum=1)
    with pytest.raises(ConfigError, match="field 'overlap': 'sometimes' is not one of"):
        JobSpec.create("j", "@hourly", command=["x"], overlap="sometimes")
    with pytest.raises(ConfigError, match="H tokens hash the job name"):
        JobSpec(name="j", schedule=JobSpec.create("k", "@hourly", command=["x"]).schedule, command=("x",))
    cluster = ClusterConfig(namespace="n", size=1)
    job = JobSpec.create("j", "@hourly", command=["x"])
    with pytest.raises(ConfigError, match="duplicate job name"):
        Config(cluster=cluster, jobs=(job, job))


# --------------------------------------------------------------------------- spec_hash


def test_spec_hash_ignores_key_order_and_changes_with_each_field(tmp_path: Path) -> None:
    a = load_config(write(tmp_path, MINIMAL)).job("backup")
    reordered = MINIMAL.replace(
        'name = "backup"\nschedule = "30 2 * * *"\ncommand = ["/bin/backup"]',
        'command = ["/bin/backup"]\nschedule = "30 2 * * *"\nname = "backup"',
    )
    assert load_config(write(tmp_path, reordered)).job("backup").spec_hash == a.spec_hash
    assert len(a.spec_hash) == 16 and int(a.spec_hash, 16) >= 0
    base = {"command": ["/bin/backup"]}
    variants = [
        JobSpec.create("backup", "30 3 * * *", **base),
        JobSpec.create("backup", "30 2 * * *", timezone="Europe/Berlin", **base),
        JobSpec.create("backup", "30 2 * * *", dst="every", **base),
        JobSpec.create("backup", "30 2 * * *", command=["/bin/backup", "-v"]),
        JobSpec.create("backup", "30 2 * * *", shell="/bin/backup"),
        JobSpec.create("backup", "30 2 * * *", timeout_ms=60_000, **base),
        JobSpec.create("backup", "30 2 * * *", starting_deadline_ms=30_000, **base),
        JobSpec.create("backup", "30 2 * * *", overlap=Overlap.ALLOW, **base),
        JobSpec.create("backup", "30 2 * * *", delivery=Delivery.AT_LEAST_ONCE, **base),
        JobSpec.create("backup", "30 2 * * *", misfire="run-once", **base),
        JobSpec.create("backup", "30 2 * * *", retries=1, **base),
        JobSpec.create("backup", "30 2 * * *", env={"A": "1"}, **base),
    ]
    assert JobSpec.create("backup", "30 2 * * *", **base).spec_hash == a.spec_hash
    hashes = {v.spec_hash for v in variants}
    assert a.spec_hash not in hashes and len(hashes) == len(variants)


def test_spec_hash_stable_across_processes() -> None:
    code = (
        "from quorum_cron.config.settings import JobSpec;"
        "print(JobSpec.create('backup', 'H 2 * * *', command=['/bin/backup'],"
        " env={'B': '2', 'A': '1'}).spec_hash)"
    )
    env = {"PYTHONHASHSEED": "777", "PYTHONPATH": str(Path(__file__).parents[1])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    here = JobSpec.create("backup", "H 2 * * *", command=["/bin/backup"], env={"A": "1", "B": "2"})
    assert out.stdout.strip() == here.spec_hash


def test_parse_config_from_dict() -> None:
    config = parse_config({"cluster": {"name": "n", "size": 1}}, "inline")
    assert config.jobs == () and config.source == "inline"
    with pytest.raises(InvalidConfig, match=r"^inline: cluster: field 'size': missing"):
        parse_config({"cluster": {"name": "n"}}, "inline")


def test_ntp_unreachable_defaults_to_abstain_only_when_servers_are_listed(tmp_path: Path) -> None:
    with_servers = MINIMAL.replace("[cluster]\n", '[cluster]\nntp_servers = ["127.0.0.1"]\n', 1)
    assert load_config(write(tmp_path, with_servers)).cluster.ntp_unreachable == "abstain"


def test_abstain_without_ntp_servers_is_refused(tmp_path: Path) -> None:
    text = MINIMAL.replace("[cluster]\n", '[cluster]\nntp_unreachable = "abstain"\n', 1)
    with pytest.raises(ConfigError, match="'abstain' with no ntp_servers would never vote"):
        load_config(write(tmp_path, text))


def test_wait_replicas_reaches_the_store(tmp_path: Path) -> None:
    from quorum_cron.agent.startup import open_node_store

    text = MINIMAL.replace("size = 3", 'size = 3\nwait_replicas = 1\nwait_timeout = "250ms"')
    cluster = load_config(write(tmp_path, text)).cluster
    assert (cluster.wait_replicas, cluster.wait_timeout_ms) == (1, 250)
    assert load_config(write(tmp_path, MINIMAL)).cluster.wait_replicas == 0
    store, _ = open_node_store("redis://127.0.0.1:1/0", cluster)  # connects lazily: nothing listens there
    try:
        wait = store._wait
        assert wait is not None and (wait.replicas, wait.timeout_ms) == (1, 250)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("wait_replicas = -1", "field 'wait_replicas': -1 is out of range (expected 0 to 16)"),
        ('wait_replicas = "one"', "field 'wait_replicas'"),
        ('wait_timeout = "0ms"', "field 'wait_timeout'"),
        ('wait_timeout = "1m"', "field 'wait_timeout'"),
    ],
)
def test_bad_wait_settings_are_refused(tmp_path: Path, line: str, fragment: str) -> None:
    message = only_error(tmp_path, MINIMAL.replace("size = 3", f"size = 3\n{line}"))
    assert fragment in message, message


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        # A number out of range was quoted ("'99' is out of range"), reading like the string a
        # quoted value is refused as ("'99' is a string"): the two mistakes looked the same.
        ("ledger_maxlen = 99", "field 'ledger_maxlen': 99 is out of range (expected 100 to 10000000)"),
        ('ledger_maxlen = "99"', "field 'ledger_maxlen': '99' is a string (expected an integer"),
        ("output_tail = 65537", "field 'output_tail': 65537 is out of range (expected 0 to 65536)"),
        ('max_skew = "2m"', "field 'max_skew': '2m' is out of range (expected 1ms to 1m)"),
    ],
)
def test_a_number_out_of_range_is_shown_unquoted(tmp_path: Path, line: str, fragment: str) -> None:
    message = only_error(tmp_path, MINIMAL.replace("size = 3", f"size = 3\n{line}"))
    assert fragment in message, message


def test_wait_replicas_on_a_standalone_redis_is_named_at_start(redis_server: EmbeddedRedis) -> None:
    from quorum_cron.agent.build import replica_shortfall
    from quorum_cron.agent.startup import open_node_store

    cluster = ClusterConfig(namespace="wait", size=3, wait_replicas=1)
    store, _ = open_node_store(redis_server.url, cluster)
    try:
        warning = replica_shortfall(store, 1, "redis://test")
        assert warning is not None
        assert warning.startswith("wait_replicas = 1 but redis://test has 0 connected replica(s)")
        assert "\n" not in warning
        assert replica_shortfall(store, 0, "redis://test") is None
    finally:
        store.close()


# --------------------------------------------------------------------------- env_passthrough


def test_env_passthrough_names_agent_variables_and_never_quorum_crons_own(tmp_path: Path) -> None:
    text = MINIMAL + 'env_passthrough = ["AWS_PROFILE", "HTTPS_PROXY"]\n'
    job = load_config(write(tmp_path, text)).job("backup")
    assert job.env_passthrough == ("AWS_PROFILE", "HTTPS_PROXY")
    # Absent, the spec hash is the one it always was (a rolling upgrade keeps its quorum).
    plain = load_config(write(tmp_path, MINIMAL)).job("backup")
    assert plain.env_passthrough == () and job.spec_hash != plain.spec_hash
    assert plain.spec_hash == JobSpec.create("backup", "30 2 * * *", command=["/bin/backup"]).spec_hash
    line = only_error(tmp_path, MINIMAL + 'env_passthrough = ["QUORUM_CRON_REDIS_URL"]\n')
    assert "env_passthrough" in line and "'QUORUM_CRON_REDIS_URL'" in line and "Redis URL" in line
    line = only_error(tmp_path, MINIMAL + 'env_passthrough = ["not a name"]\n')
    assert "'not a name'" in line
    line = only_error(tmp_path, MINIMAL + 'env_passthrough = "AWS_PROFILE"\n')
    assert "env_passthrough" in line and "array of strings" in line


def test_jobs_share_one_empty_env_and_alert_on_and_carry_no_dict() -> None:
    """Memory at scale (issue 27): 100,000 jobs hold one empty ``env`` and one ``alert_on``
    between them, not one each, and no ``__dict__``; the shared ``env`` is read-only, so no job
    can change another's."""
    a = JobSpec.create("a", "* * * * *", command=["/bin/a"])
    b = JobSpec.create("b", "*/5 * * * *", command=["/bin/b"], alert_on=list(a.alert_on))
    assert a.env is b.env and a.alert_on is b.alert_on
    with pytest.raises(TypeError):
        a.env["X"] = "1"  # type: ignore[index]
    c = JobSpec.create("c", "* * * * *", command=["/bin/c"], env={"X": "1"}, alert_on=["failed"])
    assert dict(c.env) == {"X": "1"} and dict(a.env) == {} and c.alert_on == ("failed",)
    assert not hasattr(a, "__dict__") and not hasattr(a.schedule, "__dict__")
    assert a.spec_hash is a.spec_hash and b.schedule.min_interval_ms == 300_000  # (computed once)
