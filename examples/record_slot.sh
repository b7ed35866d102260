#!/bin/sh
# A job that records that it ran: one line when it starts, one when it ends.
#
#   record_slot.sh FILE [SECONDS] [MARK]
#
# Each line is "start|end JOB SLOT_MS TOKEN NODE PID MARK", appended with one
# write (O_APPEND), so lines from jobs on different nodes sharing FILE never
# interleave. The tests and `quorum-cron demo` count these lines: they are
# what actually ran, independent of what the ledger says.
out="$1"
secs="${2:-0}"
mark="${3:--}"
echo "start $QUORUM_CRON_JOB $QUORUM_CRON_SLOT_MS $QUORUM_CRON_TOKEN $QUORUM_CRON_NODE $$ $mark" >> "$out"
if [ "$secs" != "0" ]; then
    sleep "$secs"
fi
echo "end $QUORUM_CRON_JOB $QUORUM_CRON_SLOT_MS $QUORUM_CRON_TOKEN $QUORUM_CRON_NODE $$ $mark" >> "$out"
