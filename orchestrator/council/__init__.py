"""orch council run: seats review, judge each other anonymously, a tally, a chair verdict."""
