"""The chair: one model that reads the answers of others and writes the one answer a run ends
on. One packet builder (packet.py) and one set of marks (marks.py) for its modes (modes.py):
a fanout's synthesis, plain or structured (synthesis.py, structured.py), a deliberation's
synthesis of its final answers, and a council's verdict (council/chair.py supplies the
council's own sections)."""
