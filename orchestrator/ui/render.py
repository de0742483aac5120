"""Templates and model text: Jinja2 with autoescape on for every template, and markdown with
raw HTML off (markdown-it-py also refuses ``javascript:``/``vbscript:``/``file:``/``data:``
links), so an answer can show its formatting and never run."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


@cache
def _markdown():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False, "linkify": False})


def markdown(text: Any):
    """Model text as safe HTML (a Markup, so the template does not escape it twice)."""
    from markupsafe import Markup

    return Markup(_markdown().render("" if text is None else str(text)))


def money(value: Any) -> str:
    if value is None:
        return "?"
    if 0 < value < 0.00005:
        return "<$0.0001"
    return f"${value:,.4f}"


def tokens(usage: Any) -> str:
    if not isinstance(usage, dict):
        return "?"
    return f"{usage.get('input_tokens', 0):,} in / {usage.get('output_tokens', 0):,} out"


@cache
def environment():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                             autoescape=True, undefined=jinja2.ChainableUndefined)
    env.filters.update(markdown=markdown, money=money, tokens=tokens)
    return env


def page(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
