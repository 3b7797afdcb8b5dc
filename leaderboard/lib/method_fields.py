"""The facts a benchmark asks of every method (its bundle's ``method_fields``): the input a method
reads (points, RGB-D, multi-view images), its pretraining data, the detector or LLM it uses, its
size. Declared per benchmark, answered per method on the method form, the API and ``lb method set``,
shown on method pages, and, where declared, as a board's column and filter and in its exports.
Paper rows may carry them too.

A value is kept as JSON: a choice or text or URL as a string, a number as a number, yes/no as a
boolean. ``clean`` turns what a form, the API or ``lb`` sent into that value, or refuses it naming
the field, the rule and the value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator

TYPES = ("choice", "text", "number", "url", "bool")
FILTERABLE = ("choice", "bool")  # a filter offers every value: a choice's, or yes and no
YES, NO = ("yes", "true", "1", "y"), ("no", "false", "0", "n")
MAX_TEXT = 200


@dataclass(frozen=True)
class MethodField:
    """One declared field: ``name`` (a slug: its key in the API and the URL), ``label`` (what pages
    call it), ``type`` (one of ``TYPES``), ``choices`` (a choice's values), ``required`` (publishing
    on the benchmark needs an answer), ``column`` (a column of the board) and ``filter`` (a filter
    of the board: choice and yes/no fields only), ``help`` (said under it on the form)."""

    name: str
    label: str
    type: str
    choices: tuple[str, ...] = ()
    required: bool = False
    column: bool = False
    filter: bool = False
    help: str = ""

    @classmethod
    def of(cls, data: dict[str, Any]) -> MethodField:
        return cls(name=data["name"], label=data.get("label") or data["name"], type=data["type"],
                   choices=tuple(data.get("choices", ())), required=bool(data.get("required", False)),
                   column=bool(data.get("column", False)), filter=bool(data.get("filter", False)),
                   help=data.get("help", ""))

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "type": self.type, "choices": list(self.choices),
                "required": self.required, "column": self.column, "filter": self.filter, "help": self.help}

    def clean(self, raw: Any) -> Any:
        """The stored value of ``raw`` (None: no answer), or ``ValueError`` saying what was expected."""
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            return None
        expected = f"Expected {self.label} ({self.name}) to be"
        if self.type == "bool":
            if isinstance(raw, bool):
                return raw
            if isinstance(raw, str) and raw.strip().lower() in YES + NO:
                return raw.strip().lower() in YES
            raise ValueError(f"{expected} yes or no, but got {raw!r}")
        if self.type == "number":
            value = raw
            if isinstance(raw, str):
                try:
                    value = float(raw.strip())
                except ValueError:
                    value = raw
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{expected} a number, but got {raw!r}")
            return int(value) if float(value).is_integer() and abs(value) < 2**53 else float(value)
        if not isinstance(raw, str):
            raise ValueError(f"{expected} text, but got {raw!r}")
        text = raw.strip()
        if self.type == "choice":
            if text not in self.choices:
                raise ValueError(f"{expected} one of {', '.join(self.choices)}, but got {text!r}")
            return text
        if len(text) > MAX_TEXT:
            raise ValueError(f"{expected} at most {MAX_TEXT} characters, but got {len(text):,}")
        if self.type == "url":
            try:
                URLValidator(schemes=["http", "https"])(text)
            except ValidationError:
                raise ValueError(f"{expected} an http(s) URL, but got {text!r}") from None
        return text

    def shown(self, value: Any) -> str:
        """The value as pages and CSV write it: yes/no, a number as given, text as it is; "" for none."""
        if value is None:
            return ""
        if self.type == "bool":
            return "yes" if value else "no"
        if self.type == "number" and isinstance(value, float):
            return f"{value:g}"
        return str(value)

    @property
    def options(self) -> list[tuple[str, str]]:
        """A filter's values, as (URL value, label)."""
        if self.type == "bool":
            return [("yes", "yes"), ("no", "no")]
        return [(c, c) for c in self.choices]

    def filter_value(self, raw: str) -> Any:
        """The stored value a filter's URL value asks for, or None when it is none of its options."""
        if self.type == "bool":
            return True if raw == "yes" else False if raw == "no" else None
        return raw if raw in self.choices else None


def declared(benchmark: Any) -> list[MethodField]:
    """The fields ``benchmark``'s bundle declares, in order."""
    return [MethodField.of(f) for f in (benchmark.method_fields or [])]


def values_for(fields: list[MethodField], answers: dict[str, Any]) -> dict[str, Any]:
    """The answers to ``fields`` (a method's for one benchmark, or a paper row's), declared ones only."""
    return {f.name: answers[f.name] for f in fields if answers.get(f.name) is not None}


def missing(fields: list[MethodField], answers: dict[str, Any]) -> list[str]:
    """The labels of the required ``fields`` without an answer."""
    return [f.label for f in fields if f.required and answers.get(f.name) is None]


def check_bundle_fields(fields: list[dict[str, Any]]) -> list[tuple[tuple[Any, ...], str]]:
    """What the schema cannot say of a bundle's ``method_fields``: (key path, problem) of each problem."""
    problems: list[tuple[tuple[Any, ...], str]] = []
    seen: set[str] = set()
    for i, field in enumerate(fields):
        where = ("method_fields", i)
        if field["name"] in seen:
            problems.append(((*where, "name"), f"field {field['name']!r} is declared twice"))
        seen.add(field["name"])
        if field["type"] == "choice" and not field.get("choices"):
            problems.append(((*where, "choices"), "missing; a choice field lists its choices"))
        if field["type"] != "choice" and "choices" in field:
            problems.append(((*where, "choices"), f"only a choice field has choices; this one is {field['type']}"))
        if field.get("filter") and field["type"] not in FILTERABLE:
            problems.append(((*where, "filter"), f"expected a choice or bool field to be a filter, but "
                                                 f"{field['name']!r} is {field['type']}"))
        if len(set(field.get("choices", ()))) != len(field.get("choices", ())):
            problems.append(((*where, "choices"), "expected each choice once"))
    return problems
