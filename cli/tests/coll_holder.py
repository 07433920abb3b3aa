# SPDX-License-Identifier: MIT
"""Another local user's leverage on a collector (test_collector.py,
OtherUser): holds N idle connections to the abstract socket NAME (found,
as anyone finds it, in /proc/net/unix) without ever sending a packet,
and makes new ones as the collector closes them, until killed. Prints
"holding" once it has tried N connections.

usage: coll_holder.py NAME N"""
import os
import resource
import select
import socket
import sys
import time


def main():
    name, n = sys.argv[1], int(sys.argv[2])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 64), hard))
    held = []

    def connect():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.setblocking(False)
        try:
            s.connect("\0" + name)
        except (BlockingIOError, ConnectionRefusedError, OSError):
            s.close()
            return None
        return s

    said = False
    while True:
        while len(held) < n:
            s = connect()
            if s is None:
                break
            held.append(s)
        if not said:
            print("holding", len(held), flush=True)
            said = True
        # the ones the collector closed: made again
        r, _, _ = select.select(held[:1000], [], [], 0.05)
        for s in r:
            held.remove(s)
            s.close()
        time.sleep(0.01)


if __name__ == "__main__":
    main()
