"""Corpus: calls."""
