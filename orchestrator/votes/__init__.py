"""Counting answers: what two answers being "the same" means, the majority of a fanout's final
answers (``--aggregate vote``) and a deliberation's votes. Pure functions of plain data, tested
by tables and properties (tests/test_votes.py)."""
