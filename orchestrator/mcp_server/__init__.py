"""``orch mcp``: orch as an MCP server on stdio, so coding agents can call it as a tool.

The ``mcp`` SDK is an optional extra (``pip install 'orch[mcp]'``), imported only when
``orch mcp`` runs. See docs/mcp.md.
"""
