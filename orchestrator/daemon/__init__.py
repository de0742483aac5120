"""``orch serve``: one warm process per user that runs fanout, council and bench jobs for
clients over a Unix socket (docs/serve.md). ``paths``, ``protocol`` and ``client`` import only
the standard library: a client never pays for litellm."""
