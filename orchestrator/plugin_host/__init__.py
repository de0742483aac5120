"""Hosting plugins: finding and loading them, calling their hooks at one boundary, checking their answers, deadlines and config."""
