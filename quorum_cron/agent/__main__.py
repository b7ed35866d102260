"""``python -m quorum_cron.agent``: the ``quorum-cron agent`` command on its own.

The demo and the tests start agent processes this way, so they depend only
on the agent and not on how the main command group is assembled.
"""

from quorum_cron.commands.agent import agent

if __name__ == "__main__":
    agent(prog_name="quorum-cron agent")
