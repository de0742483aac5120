"""Keeping secrets and untrusted text in their place: the key registry, scrubbed output, withheld credentials, the workspace root."""
