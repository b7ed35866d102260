"""A number-of-seconds option type that refuses NaN, for the commands' ``click.FloatRange`` options.

NaN compares false with both bounds of a :class:`click.FloatRange`, so the
range let it through: ``check-clock --timeout nan`` reached a socket timeout
(a traceback), ``demo --duration nan`` ran a demo of no slots and reported
success. The bounds refuse ``inf``.
"""

from __future__ import annotations

import math
from typing import Any

import click

__all__ = ["Seconds"]


class Seconds(click.FloatRange):
    """:class:`click.FloatRange` of seconds, NaN refused as not a number (one usage line, exit 1)."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        seconds = super().convert(value, param, ctx)
        if math.isnan(seconds):
            self.fail(f"{value!r} is not a number of seconds (expected {self._describe_range()})", param, ctx)
        return seconds
