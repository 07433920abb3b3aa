#!/bin/sh
# SPDX-License-Identifier: MIT
# hang_dump.sh PID: the stacks of every thread of PID and of each of its
# descendants (gdb -batch), to stdout. What a test harness runs when a
# test outlives its deadline, so that a hang names its cause in the log
# (tests/support/hang_watch.c, scripts/hang_stress.py, tool_testlib.py).
# Skips itself and its own gdb; never stops a process for longer than one
# gdb attach (each bounded to 60 s).
self=$$
dump() {
    [ "$1" = "$self" ] && return
    [ -r "/proc/$1/cmdline" ] || return
    echo "=== hang dump: pid $1 ($(tr '\0' ' ' <"/proc/$1/cmdline" | cut -c1-200))"
    echo "    state: $(sed -n 's/^State:[[:space:]]*//p' "/proc/$1/status")"
    if command -v gdb >/dev/null 2>&1; then
        timeout 60 gdb -batch -nx -q -p "$1" -ex 'set pagination off' \
            -ex 'thread apply all bt' 2>&1 |
            grep -v -e '^\[New LWP' -e '^\[Thread debugging' -e '^Using host libthread_db' \
                -e '^warning: ' -e '^$'
    else
        for t in /proc/"$1"/task/*; do
            echo "  thread ${t##*/}: $(cat "$t/comm") wchan=$(cat "$t/wchan" 2>/dev/null)"
        done
    fi
    for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
        case "$(cat /proc/"$c"/comm 2>/dev/null)" in
        gdb | timeout) ;;
        *) dump "$c" ;;
        esac
    done
}
dump "$1"
