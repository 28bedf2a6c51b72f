#!/usr/bin/env python3
"""Checks that no arrow runs up: a room of daemon/ includes only rooms below it.

    tools/dev/arrows.py [--check]

The order is the rooms table of docs/architecture.md (rows `daemon/<room>/`,
top to bottom); an include "<room>/..." in daemon/<other>/ counts as an arrow
from <other> to <room>. Prints every arrow that points up (or to a room the
table does not list); with --check the exit status is 1 when there is one.
"""
import argparse
import os
import re
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/dev/ -> the tree
    with open(os.path.join(root, "docs", "architecture.md"), encoding="utf-8") as f:
        order = re.findall(r"^\| `daemon/(\w+)/` \|", f.read(), flags=re.M)
    rank = {room: i for i, room in enumerate(order)}
    rooms = sorted(d for d in os.listdir(os.path.join(root, "daemon")) if os.path.isdir(os.path.join(root, "daemon", d)))
    problems = []
    for room in rooms:
        if room not in rank:
            problems.append(f"daemon/{room}/ is not in the rooms table of docs/architecture.md")
            continue
        folder = os.path.join(root, "daemon", room)
        for name in sorted(os.listdir(folder)):
            if not name.endswith((".h", ".cpp", ".c")):
                continue
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    m = re.match(r'\s*#\s*include\s+"(\w+)/', line)
                    if m and m.group(1) in rooms and m.group(1) != room and rank.get(m.group(1), -1) < rank[room]:
                        problems.append(f"daemon/{room}/{name}:{n}: includes {m.group(1)}/, a room above it")
    for p in problems:
        print(p)
    if not problems:
        print(f"no arrow runs up ({len(order)} rooms: {' > '.join(order)})")
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    sys.exit(main())
