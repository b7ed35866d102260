"""How a slot was decided, as far as the store can tell: the membership then, and which voters counted.

The store keeps no membership record per slot. Two pages need what can be
told all the same: the slot page names the record in force when the slot
was decided (:func:`membership_then`), and the slot page and the job page's
history show apart the voters that did not count, exactly as ``history``
does (the computation is :mod:`quorum_cron.store.voters`, shared with it).
A corrupt value in what is read for that (the membership log, a slot
record) is not the page's failure: the voters are shown unmarked, and the
job page says why among its unreadable parts.
"""

from __future__ import annotations

from collections.abc import Sequence

from quorum_cron.config.settings import Config
from quorum_cron.core import model
from quorum_cron.errors import StoreError, StoreUnavailable
from quorum_cron.store import keys as store_keys
from quorum_cron.store.base import LedgerEntry, ObservedStore, SlotState, SlotView
from quorum_cron.store.connect import store_failure
from quorum_cron.store.voters import MEMBERSHIP_LOG_READ, VoterAccount, account, read_accounts
from quorum_cron.web.recent import MAX_MESSAGE, corrupt_line

__all__ = ["accounts", "membership_then", "slot_account"]


def membership_then(
    store: ObservedStore, decided_ms: int, log_read: int
) -> tuple[model.Membership | None, str]:
    """The namespace's membership record when a slot was decided, and how sure that is.

    The store keeps no membership per slot, but it keeps the record's changes
    (``membership_log``, its newest ``log_read``): the newest change at or before the decision is the
    record the votes were counted under (``"slot"``). When the log does not
    reach back that far the current record is given, said to be the current
    one (``"now"``); with no record at all, this server's config (``"config"``).
    """
    stored = store.membership()
    if stored is None:
        return None, "config"
    if stored.changed_ms <= decided_ms:
        return stored, "slot"
    for m in store.membership_log(log_read):
        if m.changed_ms <= decided_ms:
            return m, "slot"
    return stored, "now"


def accounts(
    store: ObservedStore, config: Config, entries: Sequence[LedgerEntry]
) -> tuple[list[VoterAccount], str]:
    """Which voters of each ledger entry counted, as ``history`` tells it; and "" or the one line
    that says why nothing could be told (a corrupt value read).

    The line names the membership log's key when that is what cannot be read (read once more to
    tell, as :mod:`.recent` tells a job's corrupt key), and says the store's answer once
    (:func:`~quorum_cron.store.connect.store_failure`): the error's own text named the store's
    URL and its internal operation instead."""
    try:
        return read_accounts(store, entries, config.cluster.max_skew_ms), ""
    except StoreUnavailable:
        raise
    except StoreError as exc:
        return [VoterAccount() for _ in entries], "cannot tell which voters counted: " + _why(
            store, config, exc
        )


def _why(store: ObservedStore, config: Config, exc: StoreError) -> str:
    """The corrupt membership log's key and the store's answer, else the answer alone (a slot read)."""
    try:
        store.membership_log(MEMBERSHIP_LOG_READ)
    except StoreUnavailable:
        raise
    except StoreError as log_exc:
        return corrupt_line(store_keys.membership_log_key(config.cluster.namespace), log_exc)
    why = store_failure(exc)
    return why if len(why) <= MAX_MESSAGE else why[:MAX_MESSAGE] + " …"


def slot_account(
    store: ObservedStore, config: Config, view: SlotView, final: LedgerEntry | None
) -> VoterAccount:
    """Which voters of one slot counted: from its final ledger entry, or while it has none yet
    (committed, running) from its record, which the ledger entry will copy."""
    present = view.state != SlotState.ABSENT
    if final is None and present and view.committed_ms:
        final = LedgerEntry(
            view.job,
            view.fire_ms,
            view.state,
            view.reason,
            view.voters,
            view.executor,
            view.token,
            view.committed_ms,
            view.started_ms,
            view.finished_ms,
            "",
            view.epoch,
        )
    if final is None or not final.committed_ms:
        return VoterAccount()
    try:
        log = store.membership_log(MEMBERSHIP_LOG_READ)
    except StoreUnavailable:
        raise
    except StoreError:
        return VoterAccount()  # (the page is shown; its voters unmarked: nothing told)
    return account(final, log, view if present else None, config.cluster.max_skew_ms)
