"""Errors whose text a submitter sees.

Only ``SubmissionError`` and its subclasses become text on a submission page;
any other exception is logged on the worker and shown as "Internal evaluation
error". Messages follow one grammar: name the file and the field, state the
rule, show the value ("Expected `answer` to be a string, but got 3").
A message never quotes hidden labels.
"""

from __future__ import annotations


class SubmissionError(Exception):
    """A problem the submitter can fix; its text is shown verbatim."""

    kind = "invalid_input"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class PredictionFormatError(SubmissionError):
    """The predictions file does not follow the track's format."""


class PlatformError(Exception):
    """A fault of the service, not of the file (storage, broker): refunded, and its text is shown.

    The text names no path, host or internal detail; those go to the worker's log.
    """

    kind = "platform_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class LabelsError(Exception):
    """The hidden labels are unusable: a maintainer's problem, never shown to submitters."""


def where(file: str, *parts: object) -> str:
    """Format a location such as ``predictions.json: question 123`` for messages."""
    return ": ".join([file, *(str(p) for p in parts if p not in (None, ""))])
