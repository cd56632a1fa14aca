#!/usr/bin/env python3
"""Event follower: print what happens on mcpd's servers as it happens.

    python3 examples/python/follow_events.py [--limit N] [--server NAME]

It subscribes to list changes, server states and logs of every server, and
to updates of demo://clock when the demo server is there. When mcpd drops
the stream (a restart, a lost connection) the client reconnects and
resumes after the last event it printed; events mcpd no longer buffers
arrive as one "gap" event.
"""

from __future__ import annotations

import argparse
import sys

import mcpd_grpc
from mcpd_grpc import EventKind


def describe(ev: mcpd_grpc.Event) -> str:
    if ev.kind is EventKind.RESOURCE_UPDATED:
        return f"{ev.server}: resource {ev.uri} updated"
    if ev.kind is EventKind.SERVER_STATE and ev.state is not None:
        return f"{ev.server}: now {ev.state.value}" + (f" ({ev.error})" if ev.error else "")
    if ev.kind is EventKind.LOG and ev.log is not None:
        return f"{ev.server}: [{ev.log.level.value}] {ev.log.logger}: {ev.log.data}"
    if ev.kind is EventKind.GAP:
        return f"missed events {ev.gap_first}..{ev.gap_last}"
    return f"{ev.server}: {ev.kind.value}"  # tools_changed, prompts_changed, resources_changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=0, help="stop after this many events (0: never)")
    parser.add_argument("--server", action="append", default=[], help="only this server (repeatable)")
    args = parser.parse_args()

    with mcpd_grpc.Client(timeout=30) as mcpd:
        resources = []
        if any(s.name == "demo" for s in mcpd.servers()):
            resources.append(("demo", "demo://clock"))
        count = 0
        with mcpd.subscribe(servers=args.server, resources=resources, reconnect_timeout=None) as events:
            try:
                for ev in events:
                    print(f"#{ev.sequence} {describe(ev)}", flush=True)
                    count += 1
                    if args.limit and count >= args.limit:
                        break
            except KeyboardInterrupt:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
