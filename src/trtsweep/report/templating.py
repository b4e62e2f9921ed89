"""The report's Jinja2 environment (templates/: report.html.j2, compare.html.j2), shared by page.py and compare.py
without loading matplotlib for a comparison."""

from __future__ import annotations

import functools
import html
from typing import Any

import jinja2
from markupsafe import Markup


def _escape(value: Any) -> Markup:
    """Autoescape with the standard library's entities (&quot;, &#x27;), as the page has always been written: the
    same results give the same bytes. Markup (the charts, the macros' output) is kept as it is."""
    return value if isinstance(value, Markup) else Markup(html.escape(str(value)))


@functools.cache
def environment() -> jinja2.Environment:
    """The report's templates (report.html.j2, compare.html.j2): every `{{ value }}` is escaped unless it is Markup."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("trtsweep.report", "templates"),
        autoescape=True,
        finalize=_escape,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
