#!/bin/bash
# A trivial rank for benchmark 12: record when it started (bash's own clock, no exec) and
# who started it, then sleep $RANK_SLEEP_S seconds. $RANK_STARTS is the directory.
printf '%s %s\n' "$EPOCHREALTIME" "$PPID" > "$RANK_STARTS/$RANK"
exec sleep "${RANK_SLEEP_S:-3}"
