"""Importing a crontab(5) file: read it as cron does, and write the quorum-cron jobs that mean the same.

Two steps, each in its own module:

* :mod:`quorum_cron.crontab.parse` reads the file as cronie / Vixie cron do
  (environment lines that apply to the lines below them, ``@`` aliases,
  ``%`` as standard input, the user column of system crontabs) into
  :class:`~quorum_cron.crontab.parse.CronEntry` values, and lists the lines
  it cannot read (the five time fields by :mod:`quorum_cron.crontab.fields`, in
  cron's terms);
* :mod:`quorum_cron.crontab.translate` turns each entry into a ``[[jobs]]``
  table that keeps cron's meaning (schedule and zone, shell, environment,
  stdin, working directory) and says, as TOML comments, what quorum-cron does
  differently (DST, MAILTO, RANDOM_DELAY, the user column).

Both are pure (no clock, no files): the ``import-crontab`` command
(:mod:`quorum_cron.commands.import_crontab`) does the reading and printing. The part may
import only the configuration (the schedules and job specs it writes) and the shared
``errors``, ``redact`` and ``printable`` (docs/architecture.md).
"""

from quorum_cron.crontab.parse import BadLine, CronEntry, Crontab, is_user_name, parse_crontab
from quorum_cron.crontab.translate import Imported, translate

__all__ = ["BadLine", "CronEntry", "Crontab", "Imported", "is_user_name", "parse_crontab", "translate"]
