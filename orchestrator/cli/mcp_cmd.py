"""``orch mcp``: orch as an MCP server on stdio, for coding agents (docs/mcp.md)."""

from __future__ import annotations

import sys

import click

from orchestrator.errors import OrchError


@click.command()
def mcp() -> None:
    """Serve orch's tools over MCP on stdin/stdout, for coding agents.

    Tools: fanout (several models, one prompt), council_run (a multi-model review), spend
    (the ledger) and runs (past runs). The process is long-lived, so litellm and the
    plugins load once. stdout carries only MCP frames; logs go to stderr. Budgets, plugins,
    the ledger and key scrubbing apply as on the command line. Needs the mcp extra:
    pip install 'orch[mcp]'.

    \b
    A client's configuration (Claude Desktop, Claude Code, Cursor):
      {"mcpServers": {"orch": {"command": "orch", "args": ["mcp"]}}}
    """
    try:
        import mcp.server  # noqa: F401 - the optional extra, checked before stdio is taken
    except ImportError:
        raise OrchError("orch mcp needs the MCP SDK: pip install 'orch[mcp]'") from None
    from orchestrator.mcp_server.server import serve

    sys.exit(serve())
