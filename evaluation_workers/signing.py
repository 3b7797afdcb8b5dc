"""Signatures on the messages between the site and the scoring workers (stdlib only).

Anyone who can write to the broker can publish a task by name. So every
message either side sends carries ``signature``: an HMAC-SHA256, under a key
that only the site and the workers hold (the site's ``RESULTS_SIGNING_KEY``,
the workers' ``EVAL_RESULTS_SIGNING_KEY``; not the broker's password), over the
task name and a canonical JSON of every other keyword argument. Each side signs
in one place (its Celery app's ``send_task``) and checks in one place (its task
base class), so that the site records only what a worker reported and a worker
scores only what the site asked for: a worker signs whatever it reports, so an
unchecked request would make it sign a forged result.

A message that is unsigned or wrongly signed is refused: it changes nothing,
is logged (task name and submission id, never the payload) and is acknowledged
like any finished task, so the broker does not deliver it again. A message
delivered twice (the broker's redelivery) carries the same signature and is
recorded once, as any report is (attempt numbers).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

FIELD = "signature"
# Keys shorter than this are refused: the key is all that stands between the broker and the results.
MIN_KEY_LENGTH = 32


class SigningKeyError(Exception):
    """The signing key is missing or too short; the text says which variable to set."""


def key_from_environ(name: str, environ: Mapping[str, str] | None = None) -> bytes:
    """The key in ``name``, or in the file named by ``<name>_FILE``; ``SigningKeyError`` if neither."""
    environ = os.environ if environ is None else environ
    value = environ.get(name, "")
    if not value and environ.get(f"{name}_FILE"):
        try:
            with open(environ[f"{name}_FILE"], encoding="utf-8") as f:
                value = f.read().strip()
        except OSError as exc:
            raise SigningKeyError(f"{name}_FILE={environ[f'{name}_FILE']} cannot be read: {exc.strerror}") from None
    return checked_key(value, name)


def checked_key(value: str, name: str) -> bytes:
    """``value`` as a key, or ``SigningKeyError`` naming ``name`` when it is empty or too short."""
    if not value:
        raise SigningKeyError(f"{name} (or {name}_FILE) is not set: the site and every scoring worker need "
                              f"the same secret to sign their messages (deploy/README.md, 'Signed messages')")
    if len(value) < MIN_KEY_LENGTH:
        raise SigningKeyError(f"Expected {name} to be at least {MIN_KEY_LENGTH} characters, but it has "
                              f"{len(value)}; generate one with: python -c \"import secrets; "
                              f"print(secrets.token_urlsafe(32))\"")
    return value.encode()


def _canonical(name: str, kwargs: Mapping[str, Any]) -> bytes:
    """The signed bytes: the task name, a newline, the keyword arguments as sorted, compact JSON.

    The arguments go through JSON once first, as the broker carries them (tuples become lists,
    keys text), so that the sender's values and the receiver's decoded ones give the same bytes.
    """
    body = json.loads(json.dumps({k: v for k, v in kwargs.items() if k != FIELD}))
    return name.encode() + b"\n" + json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _digest(key: bytes, name: str, kwargs: Mapping[str, Any]) -> str:
    return hmac.new(key, _canonical(name, kwargs), hashlib.sha256).hexdigest()


def signed(name: str, kwargs: Mapping[str, Any] | None, key: bytes) -> dict[str, Any]:
    """``kwargs`` with their signature for task ``name`` (any earlier signature replaced)."""
    kwargs = dict(kwargs or {})
    kwargs[FIELD] = _digest(key, name, kwargs)
    return kwargs


def verified(name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any], key: bytes) -> dict[str, Any] | None:
    """The keyword arguments without their signature when it is right; None (logged) when not.

    Tasks between the site and the workers take keyword arguments only, so positional ones are refused.
    """
    given = kwargs.get(FIELD)
    if given is None:
        problem = "it is unsigned"
    elif args:
        problem = "it has positional arguments"
    else:
        try:
            expected = _digest(key, name, kwargs)
        except (TypeError, ValueError):  # values JSON cannot carry: no sender of ours made it
            expected = ""
        ok = isinstance(given, str) and given.isascii() and hmac.compare_digest(given, expected)
        problem = "" if ok else "its signature is wrong"
    if problem:
        log.warning("Refused %s for %s: %s (nothing was changed)", name, _about(kwargs), problem)
        return None
    return {k: v for k, v in kwargs.items() if k != FIELD}


def _about(kwargs: Mapping[str, Any]) -> str:
    """What a refused message was about, in a few characters: its submission or test id, never its data."""
    for field in ("submission_id", "test_id"):
        if field in kwargs:
            return f"{field.removesuffix('_id')} {str(kwargs[field])[:20]!r}"
    return "no submission"
