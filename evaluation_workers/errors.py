"""Errors whose text a submitter sees.

Only ``SubmissionError`` and its subclasses become text on a submission page;
any other exception is logged on the worker and shown as "Internal evaluation
error". Messages follow one grammar: name the file and the field, state the
rule, show the value ("Expected `answer` to be a string, but got 3").
A message never quotes hidden labels.
"""

from __future__ import annotations

# Plain words for damage that the readers' libraries describe in their own terms (zipfile's
# "File is not a zip file", a seek before the start of a tiny file, zlib's "Error -3 while
# decompressing data"): a message names the file and what was expected, never a library's text.
NO_ZIP_DIRECTORY = ("no readable zip directory (a zip file ends with one; this file was cut short, is damaged, "
                    "or is another kind of file)")
UNSUPPORTED_ZIP = ("a zip feature not read here (a newer zip version or another compression method; write it with "
                   "Python's zipfile or `zip`, stored or deflated)")
CORRUPT_COMPRESSED = "corrupt compressed data (the file is damaged or was cut short)"


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
