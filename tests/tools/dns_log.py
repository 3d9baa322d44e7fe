#!/usr/bin/env python3
"""dns_log.py - a DNS stand-in that says no to every name and logs it.

    dns_log.py [--addr 127.0.0.1] [--port 53] --log FILE

Answers every UDP query with NXDOMAIN ("no such name") at once and appends
one line per query to FILE: the name and the query type. Run it where a
program under test has a resolv.conf naming it (try_agent_cli.sh runs it
in a network namespace of its own, whose /etc/resolv.conf is bind-mounted
to "nameserver 127.0.0.1"), so that every host the program tries to reach
is named in FILE, and none is reached. Python 3 standard library only.
"""

import argparse
import socket
import struct

TYPES = {1: "A", 28: "AAAA", 5: "CNAME", 15: "MX", 16: "TXT", 33: "SRV",
         65: "HTTPS", 2: "NS", 6: "SOA", 12: "PTR"}


def question(packet):
    """(name, qtype, end of the question) of a query."""
    labels, i = [], 12
    while i < len(packet) and packet[i]:
        n = packet[i]
        labels.append(packet[i + 1:i + 1 + n].decode("ascii", "replace"))
        i += 1 + n
    qtype = struct.unpack("!H", packet[i + 1:i + 3])[0] \
        if i + 3 <= len(packet) else 0
    return ".".join(labels), qtype, i + 5


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[2])
    ap.add_argument("--addr", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=53)
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((args.addr, args.port))
    while True:
        packet, peer = sock.recvfrom(4096)
        if len(packet) < 12:
            continue
        name, qtype, end = question(packet)
        with open(args.log, "a", encoding="utf-8") as f:
            f.write("%s %s\n" % (name, TYPES.get(qtype, qtype)))
        # the query's id; flags QR, RD, RA and RCODE 3 (no such name); the
        # question echoed; no answer, authority or additional records
        reply = packet[:2] + struct.pack("!HHHHH", 0x8183, 1, 0, 0, 0) + \
            packet[12:end]
        sock.sendto(reply, peer)


if __name__ == "__main__":
    main()
