"""What a node says about its own membership: once per epoch, in one line, one count and one alert.

Apart from :mod:`.health` (which decides when the node may vote) because it
owns only the telling: a config that disagrees with the store's record at
start (``membership_mismatch``), a node that is not a member of the record
it holds (``not_a_member``, again only when the epoch changes), and a vote
the store refused. Repeating any of these per slot would bury the one line
an operator needs in thousands.

A removed node that had not heard of its removal learns it twice: from the
job that refused its vote (the core takes the job's record at once) and
from the record it then holds. Both say "not a member of epoch E": the
first to say it owns the ``not_a_member`` line and alert of that epoch, the
other only counts (one alert per node per epoch, as docs/operations.md
promises).
"""

from __future__ import annotations

import logging

from quorum_cron.agent.alerts import AlertHook, AlertKind
from quorum_cron.agent.logs import EVENT_LOGGER, event
from quorum_cron.agent.membership import config_disagreement
from quorum_cron.agent.metrics import Metrics
from quorum_cron.agent.spec import AgentSettings
from quorum_cron.config.membership import members_hint
from quorum_cron.core.actions import Refused
from quorum_cron.core.model import MembershipRecord

__all__ = ["MemberReports", "members_hint"]

log = logging.getLogger(EVENT_LOGGER)


class MemberReports:
    """The node's membership lines, counts and alerts (see the module docstring)."""

    def __init__(self, settings: AgentSettings, metrics: Metrics, alerts: AlertHook) -> None:
        self.settings = settings
        self.node = settings.node_id
        self.metrics = metrics
        self.alerts = alerts
        self._reported_epoch = 0
        """The last epoch whose "not a member" was reported (once per epoch)."""
        self._refused_epoch = 0
        """The last epoch a refused vote said this node is not a member of (its line and alert)."""

    def adopted(self, record: MembershipRecord, how: str) -> None:
        """A newer record is held (``how``: where it came from, "" for the first): one line."""
        event(
            log,
            logging.INFO,
            "membership",
            f"membership {record.describe()}{how}",
            epoch=record.epoch,
            joint=record.joint,
            members=",".join(record.current.members),
            member=record.is_member(self.node),
        )

    def config_problem(self, record: MembershipRecord | None) -> str | None:
        """At start: why this node does not vote, if its config disagrees with the stored record."""
        proposed = self.settings.membership
        if proposed is None or record is None:
            return None
        problem = config_disagreement(proposed, record, self.settings.config_source)
        if problem is None:
            return None
        said = f"not voting: {problem}"
        self.metrics.membership_refusals.labels("config_mismatch").inc()
        event(log, logging.ERROR, "membership_mismatch", said, epoch=record.epoch)
        self.alerts.raise_(AlertKind.MEMBERSHIP_MISMATCH, said, epoch=record.epoch)
        return said

    def member(self, record: MembershipRecord | None, config_agrees: bool) -> None:
        """Not a member of the record held: one line, one count and one alert per epoch."""
        if record is None:
            return
        member = record.is_member(self.node)
        self.metrics.member.set(1 if member and config_agrees else 0)
        if member:
            self._refused_epoch = 0
            if self._reported_epoch:
                self._reported_epoch = 0
                event(log, logging.INFO, "membership", f"{self.node} is a member of epoch {record.epoch}")
            return
        if self._reported_epoch == record.epoch:
            return
        self._reported_epoch = record.epoch
        message = (
            f"node {self.node} (epoch {record.epoch}) is not a member of the store's {record.describe()}: "
            f"it does not vote (add it with {members_hint('add', self.settings.config_source, [self.node])}, "
            "or stop it)"
        )
        self.metrics.membership_refusals.labels("not_member").inc()
        if self._refused_epoch == record.epoch:
            return  # (a refused vote said it: one line and one alert per epoch)
        event(log, logging.ERROR, "not_a_member", message, epoch=record.epoch, store_epoch=record.epoch)
        self.alerts.raise_(AlertKind.NOT_A_MEMBER, message, epoch=record.epoch)

    def refused(self, action: Refused) -> None:
        """The store refused a vote (stale epoch, or not a member of the job's record): once per epoch.

        A member of the job's record whose vote carried an older epoch only had not heard of a
        change yet (another member brought it to the job before this node's next heartbeat):
        routine on every change, the node votes again under it. That is one info line and the
        count, not the ``not_a_member`` alert, which pages for a node that really is out.
        """
        self.metrics.membership_refusals.labels("vote").inc()
        if action.member:
            event(
                log,
                logging.INFO,
                "membership",
                f"vote for {action.job}@{action.fire_ms} went with epoch {action.epoch}, the job enforces "
                f"epoch {action.store_epoch} already: {self.node} is a member of it and votes again under it",
                job=action.job,
                slot=action.fire_ms,
                epoch=action.epoch,
                store_epoch=action.store_epoch,
            )
            return
        if action.store_epoch and action.store_epoch == self._reported_epoch:
            return  # (the record held said it already: one line and one alert per epoch)
        self._refused_epoch = action.store_epoch
        held = f"epoch {action.store_epoch}"
        message = f"vote for {action.job}@{action.fire_ms} refused by the store: {action.reason}" + (
            ""
            if held in action.reason
            else f" (node {self.node} holds epoch {action.epoch}, the job enforces {held})"
        )
        if action.store_epoch and "not a member" not in action.reason:
            message += f"; {self.node} is not a member of {held}: it does not vote"
        event(
            log,
            logging.ERROR,
            "not_a_member",
            message,
            job=action.job,
            slot=action.fire_ms,
            epoch=action.epoch,
            store_epoch=action.store_epoch,
        )
        self.alerts.raise_(
            AlertKind.NOT_A_MEMBER,
            message,
            job=action.job,
            epoch=action.epoch,
            store_epoch=action.store_epoch,
        )
