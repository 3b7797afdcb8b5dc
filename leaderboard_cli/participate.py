"""lb participate: a benchmark's terms of use, accepted from the terminal (``/api/v1/benchmarks/<track>/participation``)."""

from __future__ import annotations

import sys
from typing import Any

from leaderboard_cli.client import ApiError, Client


def _participation_line(state: dict[str, Any]) -> str:
    refusal = state.get("refusal")
    if refusal is None:
        return f"You may submit to {state['track']}."
    return f"Not yet: {refusal['message']}"


def participate(client: Client, track: str, yes: bool) -> int:
    """Show a benchmark's terms (their address and version) and accept them; ask to take part under approval.
    Returns the exit status."""
    path = f"benchmarks/{track}/participation"
    state = client.get(path)
    version = state.get("terms_version")
    if version and not state["terms_accepted"]:
        print(f"The terms of use of {track} (version {version[:12]}): {state['terms_url']}")
        if not yes:
            if not sys.stdin.isatty():
                raise ApiError(f"Read them, then accept them with `lb participate {track} --yes`.")
            if input("Have you read them, and do you accept them? [y/N] ").strip().lower() != "y":
                print("Not accepted; nothing changed.")
                return 1
        state = client.post(path, json={"accept_terms": version})
        print(f"Accepted version {version[:12]}.")
    elif version:
        print(f"You accepted the terms of use of {track} (version {version[:12]}) on "
              f"{state['accepted_at'][:10]}: {state['terms_url']}")
    elif state["registration"] == "approval" and state["state"] == "not_requested":
        state = client.post(path, json={"join": True})
        print(f"Asked the maintainers of {track} to let you take part.")
    print(_participation_line(state))
    return 0
