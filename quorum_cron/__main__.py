"""``python -m quorum_cron``: the same command line as the ``quorum-cron`` script."""

from quorum_cron.cli import main

if __name__ == "__main__":
    main(prog_name="quorum-cron")
