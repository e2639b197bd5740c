"""Command-line flags derived from the fields of a settings group
(:mod:`strata.core.config.settings`): a flag's name, help, type, choices and bounds
are the field's, so a setting is declared once and its flag cannot drift from it."""

from __future__ import annotations

import argparse
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

from pydantic import BaseModel

from strata.core.config.settings import _base_type, _choices, _variable, default, field_help


def _bounded(kind: type, info: Any) -> Any:
    """An argparse type: ``kind`` within the field's bounds, refused in
    argparse's words (``--min-relevance: must be within 0..1``) before any work."""

    marks = {op: getattr(m, op) for m in info.metadata for op in ("ge", "gt", "le", "lt")
             if getattr(m, op, None) is not None}
    low, high = marks.get("ge", marks.get("gt")), marks.get("le", marks.get("lt"))

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        ok = all(getattr(operator, op)(value, bound) for op, bound in marks.items())
        if not ok:  # also refuses nan
            where = f"within {low:g}..{high:g}" if low is not None and high is not None else \
                f"at least {low:g}" if low is not None else f"at most {high:g}"
            raise argparse.ArgumentTypeError(f"must be {where}, got {text}")
        return value

    return parse


@dataclass(frozen=True)
class Flags:
    """Command-line flags for fields of a settings group, derived from the group.

    Each flag is ``--`` + ``prefix`` + the field's name (``_`` as ``-``) unless
    ``rename`` names it; its help is the field's (:func:`field_help`), its type and
    choices the field's annotation. A flag of a group read from the environment
    defaults to None, so an absent flag leaves the variable, else the default, to
    the group (:func:`load` with :meth:`given`); a flag of a run's config (no
    variable) defaults to the field's default. ``names`` (default: every field)
    picks the fields; ``bounded``: a value outside the field's bounds is an
    argparse error naming the flag rather than the settings' one line."""

    group: type[BaseModel]
    names: tuple[str, ...] | None = None
    prefix: str = ""
    rename: Mapping[str, str] = dc_field(default_factory=dict)
    bounded: bool = False

    def fields(self) -> tuple[str, ...]:
        return self.names if self.names is not None else tuple(self.group.model_fields)

    def flag(self, name: str) -> str:
        return "--" + self.rename.get(name, self.prefix + name.replace("_", "-"))

    def dest(self, name: str) -> str:
        return self.flag(name)[2:].replace("-", "_")

    def help(self, name: str, also: str = "") -> str:
        """The flag's help: the field's (:func:`field_help`), ``%`` escaped for argparse."""
        return field_help(self.group, name, also).replace("%", "%%")

    def add_to(self, parser: Any, **options: dict[str, Any]) -> None:
        """Add the flags to ``parser`` (a parser or an argument group); ``options``
        (by field) adds to or replaces an argument's keywords, e.g. ``required``."""
        for name in self.fields():
            info = self.group.model_fields[name]
            kind, choices = _base_type(info.annotation), _choices(info.annotation)
            kw: dict[str, Any] = {
                "dest": self.dest(name),
                "default": None if _variable(self.group, name) else default(self.group, name),
                "help": self.help(name)}
            if kind is bool:
                kw["action"] = "store_true"
            elif kind is list:
                kw["action"] = "append"
            elif choices:
                kw["choices"] = list(choices)
            elif kind in (int, float):
                kw["type"] = _bounded(kind, info) if self.bounded else kind
            parser.add_argument(self.flag(name), **{**kw, **options.get(name, {})})

    def given(self, args: Any) -> dict[str, Any]:
        """The fields whose flags ``args`` holds a value for (field name → value),
        for :func:`load` (a flag wins over its variable) or :func:`check`."""
        return {name: getattr(args, self.dest(name)) for name in self.fields()
                if getattr(args, self.dest(name), None) is not None}
