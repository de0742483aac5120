"""The embedded local model: one managed llama.cpp server shared by every orch process."""
