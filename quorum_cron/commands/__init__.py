"""Click commands of the agent side: ``agent``, ``status``, ``history``, ``trigger``, ``pause``,
``resume``, ``members``, ``demo``.

Each is a plain :class:`click.Command`; ``quorum_cron.cli`` registers them in
the main group (``main.add_command(...)``), so this package never imports the
group and the group never needs to know how a command works.

A face: may import every part below it (model, core, clock, config, store, embedded
servers, agent, web, crontab, simulator); nothing below imports it (docs/architecture.md).
"""

from quorum_cron.commands.agent import agent
from quorum_cron.commands.control import pause, resume, trigger
from quorum_cron.commands.demo import demo
from quorum_cron.commands.history import history
from quorum_cron.commands.members import members
from quorum_cron.commands.status import status

__all__ = ["COMMANDS", "agent", "demo", "history", "members", "pause", "resume", "status", "trigger"]

COMMANDS = (agent, status, history, trigger, pause, resume, members, demo)
"""Everything to register: ``for cmd in COMMANDS: main.add_command(cmd)``."""
