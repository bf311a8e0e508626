"""A client process of the concurrency and crash tests: records trials over HTTP.

``python -m tests.api.load_client URL PROJECT COUNT PREFIX [--token T]``

Each creation carries an ``Idempotency-Key`` (``PREFIX-i``) and omits ``exp_id``, so the
server allocates it; a request that fails in transport is retried with the same key (a
retry never makes a second trial). Prints one line ``ack <key> <exp_id> <status>`` per
2xx as soon as it arrives, ``fail <key> <status or error>`` per failure, and ``done``
at the end. Stops after ``--give-up`` transport failures in a row (the server is gone).
"""

from __future__ import annotations

import argparse
import sys
import time

import httpx


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("project")
    parser.add_argument("count", type=int)
    parser.add_argument("prefix")
    parser.add_argument("--token", default=None)
    parser.add_argument("--give-up", type=int, default=20)
    args = parser.parse_args()
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    out = sys.stdout
    failures_in_a_row = 0
    with httpx.Client(base_url=args.url, headers=headers, timeout=30) as client:
        for i in range(args.count):
            key = f"{args.prefix}-{i}"
            body = {"status": "discard", "core_metric": float(i), "notes": args.prefix, "specialist": args.prefix}
            while True:
                try:
                    response = client.post(
                        f"/api/v1/projects/{args.project}/trials", json=body, headers={"Idempotency-Key": key}
                    )
                except httpx.TransportError as exc:
                    failures_in_a_row += 1
                    if failures_in_a_row >= args.give_up:
                        out.write(f"fail {key} {type(exc).__name__}\ndone\n")
                        out.flush()
                        return 0
                    time.sleep(0.05)
                    continue
                failures_in_a_row = 0
                break
            if 200 <= response.status_code < 300:
                out.write(f"ack {key} {response.json()['trial']['exp_id']} {response.status_code}\n")
            else:
                out.write(f"fail {key} {response.status_code} {response.text[:200]!r}\n")
            out.flush()
    out.write("done\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
