"""Signatures on the messages between the site and the scoring workers (stdlib only).

Anyone who can write to the broker can publish a task by name. So every
message either side sends carries ``signature``: ``<key id>:<HMAC-SHA256>``
under a key that only the site and the workers hold (not the broker's
password), over the task name and a canonical JSON of every other keyword
argument, ``nonce`` among them: 128 random bits, new for every message. Each
side signs in one place (its Celery app's ``send_task``) and checks in one
place (its task base class), so that the site records only what a worker
reported and a worker scores only what the site asked for: a worker signs
whatever it reports, so an unchecked request would make it sign a forged result.

Keys come as a ring so that a site can rotate them (``Keys``): the site's
``RESULTS_SIGNING_KEYS`` and the workers' ``EVAL_RESULTS_SIGNING_KEYS`` list
``id:secret`` pairs, newest first; the first signs, every one verifies, and the
signature names the id of the key that made it. The singular variables
(``RESULTS_SIGNING_KEY``, ``EVAL_RESULTS_SIGNING_KEY``) and the key the site
generates in ``DATA_DIR`` are read as one key with the id ``default``
(deploy/README.md, "Rotating the signing key").

A message that is unsigned, wrongly signed, signed with a key the receiver does
not hold, or signed without a nonce (by a version before nonces) is refused: it
changes nothing, is logged (task name and submission, test or result id, never
the payload) and is acknowledged like any finished task, so the broker does not
deliver it again. The nonce lets the receiver tell a second delivery of one
message from a new message (``replays``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import secrets
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

FIELD = "signature"
NONCE = "nonce"
# The id of a key given alone (a singular variable, or the key generated in DATA_DIR).
DEFAULT_ID = "default"
# Keys shorter than this are refused: the key is all that stands between the broker and the results.
MIN_KEY_LENGTH = 32
_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
_NONCE = re.compile(r"[0-9a-f]{32}")


class SigningKeyError(Exception):
    """The signing keys are missing, too short or malformed; the text says which variable to set."""


class Keys:
    """Signing keys, newest first: ``(id, secret)`` pairs with distinct ids. The first signs; each verifies
    what names its id. Its text never shows a secret."""

    def __init__(self, pairs: list[tuple[str, bytes]] | tuple[tuple[str, bytes], ...]) -> None:
        if not pairs:
            raise SigningKeyError("Expected at least one signing key")
        self.pairs = tuple(pairs)
        self._by_id = dict(self.pairs)

    @property
    def ids(self) -> list[str]:
        return [key_id for key_id, _ in self.pairs]

    def secret(self, key_id: str) -> bytes | None:
        return self._by_id.get(key_id)

    def __repr__(self) -> str:
        return f"Keys({', '.join(self.ids)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Keys) and self.pairs == other.pairs

    def __hash__(self) -> int:
        return hash(self.pairs)


def as_keys(keys: Keys | bytes) -> Keys:
    """``keys``, or a bare secret as the one key ``default``."""
    return keys if isinstance(keys, Keys) else Keys([(DEFAULT_ID, keys)])


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


def parse_keys(value: str, name: str) -> Keys:
    """``id:secret,...`` (commas or new lines between keys) as ``Keys``; ``SigningKeyError`` naming ``name``
    and the key at fault (by its id or position, never its secret)."""
    entries = [entry.strip() for entry in re.split(r"[,\n]", value) if entry.strip()]
    if not entries:
        raise SigningKeyError(f"{name} is empty: expected id:secret pairs, newest first, separated by commas")
    pairs: list[tuple[str, bytes]] = []
    for position, entry in enumerate(entries, 1):
        key_id, sep, secret = entry.partition(":")
        if not sep or not _KEY_ID.fullmatch(key_id):
            raise SigningKeyError(f"Expected key {position} of {name} as id:secret, with an id of at most 40 "
                                  "letters, digits, '.', '_' or '-' (such as 2026-07), but it has "
                                  + ("no ':'" if not sep else "another id"))
        if key_id in dict(pairs):
            raise SigningKeyError(f"Expected the ids in {name} to differ, but {key_id!r} comes twice")
        pairs.append((key_id, checked_key(secret, f"the key {key_id!r} of {name}")))
    return Keys(pairs)


def keys_from_values(listed: str, single: str, list_name: str, single_name: str) -> Keys:
    """The keys of ``list_name`` (``listed``), else ``single`` as the key ``default``; both given is an error."""
    if listed and single:
        raise SigningKeyError(f"Set {list_name} or {single_name}, not both: {list_name} lists every key (write "
                              f"the one of {single_name} there as {DEFAULT_ID}:<secret>)")
    if listed:
        return parse_keys(listed, list_name)
    if not single:
        raise SigningKeyError(f"{single_name} (or {single_name}_FILE) is not set, nor {list_name} (or "
                              f"{list_name}_FILE): the site and every scoring worker need the same secret to "
                              "sign their messages (deploy/README.md, 'Signed messages')")
    return Keys([(DEFAULT_ID, checked_key(single, single_name))])


def _from_environ(name: str, environ: Mapping[str, str]) -> str:
    """``name``, or the contents of the file named by ``<name>_FILE``; "" if neither."""
    value = environ.get(name, "")
    if not value and environ.get(f"{name}_FILE"):
        try:
            with open(environ[f"{name}_FILE"], encoding="utf-8") as f:
                value = f.read().strip()
        except OSError as exc:
            raise SigningKeyError(f"{name}_FILE={environ[f'{name}_FILE']} cannot be read: {exc.strerror}") from None
    return value


def keys_from_environ(list_name: str, single_name: str, environ: Mapping[str, str] | None = None) -> Keys:
    """The keys in ``list_name`` (or its ``_FILE``), else the one in ``single_name`` (or its ``_FILE``)."""
    environ = os.environ if environ is None else environ
    return keys_from_values(_from_environ(list_name, environ), _from_environ(single_name, environ), list_name,
                            single_name)


def worker_keys(environ: Mapping[str, str] | None = None) -> Keys:
    """A scoring worker's keys: ``EVAL_RESULTS_SIGNING_KEYS``, else ``EVAL_RESULTS_SIGNING_KEY`` (each or its _FILE)."""
    return keys_from_environ("EVAL_RESULTS_SIGNING_KEYS", "EVAL_RESULTS_SIGNING_KEY", environ)


def key_from_environ(name: str, environ: Mapping[str, str] | None = None) -> bytes:
    """The one key in ``name``, or in the file named by ``<name>_FILE``; ``SigningKeyError`` if neither."""
    return checked_key(_from_environ(name, os.environ if environ is None else environ), name)


def _canonical(name: str, kwargs: Mapping[str, Any]) -> bytes:
    """The signed bytes: the task name, a newline, the keyword arguments as sorted, compact JSON.

    The arguments go through JSON once first, as the broker carries them (tuples become lists,
    keys text), so that the sender's values and the receiver's decoded ones give the same bytes.
    """
    body = json.loads(json.dumps({k: v for k, v in kwargs.items() if k != FIELD}))
    return name.encode() + b"\n" + json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _digest(key: bytes, name: str, kwargs: Mapping[str, Any]) -> str:
    return hmac.new(key, _canonical(name, kwargs), hashlib.sha256).hexdigest()


def _is_nonce(value: Any) -> bool:
    return isinstance(value, str) and _NONCE.fullmatch(value) is not None


def signed(name: str, kwargs: Mapping[str, Any] | None, keys: Keys | bytes, nonce: str | None = None) -> dict[str, Any]:
    """``kwargs`` with a nonce and their signature for task ``name`` under the first of ``keys`` (any earlier
    signature replaced). The nonce is ``nonce``, else the one already there, else a new one: signing one
    message again (a worker's report kept in its claim and then sent, Celery retrying a task) must not make
    it two messages."""
    key_id, secret = as_keys(keys).pairs[0]
    kwargs = {k: v for k, v in (kwargs or {}).items() if k != FIELD}
    if nonce is not None:
        kwargs[NONCE] = nonce
    if not _is_nonce(kwargs.get(NONCE)):
        kwargs[NONCE] = new_nonce()
    kwargs[FIELD] = f"{key_id}:{_digest(secret, name, kwargs)}"
    return kwargs


def new_nonce() -> str:
    """A message's nonce: 128 random bits, as 32 hex digits."""
    return secrets.token_hex(16)


def key_id_of(kwargs: Mapping[str, Any]) -> str:
    """The id of the key a message names in its signature ("" if it names none)."""
    given = kwargs.get(FIELD)
    key_id = given.partition(":")[0] if isinstance(given, str) and ":" in given else ""
    return key_id if _KEY_ID.fullmatch(key_id) else ""


def verified(name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any],
             keys: Keys | bytes) -> dict[str, Any] | None:
    """The keyword arguments without their signature and nonce when the signature is right; None (logged)
    when not. ``kwargs[NONCE]`` is the message's nonce (``replays``).

    Tasks between the site and the workers take keyword arguments only, so positional ones are refused.
    """
    keys = as_keys(keys)
    given = kwargs.get(FIELD)
    key_id = key_id_of(kwargs)
    if given is None:
        problem = "it is unsigned"
    elif args:
        problem = "it has positional arguments"
    elif not key_id:
        problem = "its signature names no key (signed before keys had ids, or forged)"
    elif keys.secret(key_id) is None:
        problem = (f"it is signed with the key {key_id!r}, which is not among this receiver's keys "
                   f"({', '.join(keys.ids)})")
    else:
        try:
            expected = f"{key_id}:{_digest(keys.secret(key_id) or b'', name, kwargs)}"
        except (TypeError, ValueError):  # values JSON cannot carry: no sender of ours made it
            expected = ""
        ok = isinstance(given, str) and given.isascii() and hmac.compare_digest(given, expected)
        if not ok:
            problem = "its signature is wrong"
        elif not _is_nonce(kwargs.get(NONCE)):
            problem = "it carries no nonce (signed by a version before nonces)"
        else:
            problem = ""
    if problem:
        log.warning("Refused %s for %s: %s (nothing was changed)", name, about(kwargs), problem)
        return None
    return {k: v for k, v in kwargs.items() if k not in (FIELD, NONCE)}


def about(kwargs: Mapping[str, Any]) -> str:
    """What a message is about, in a few characters: its submission, test or result id, never its data."""
    for field in ("submission_id", "test_id", "result_id"):
        if field in kwargs:
            return f"{field.removesuffix('_id')} {str(kwargs[field])[:20]!r}"
    return "no submission"
