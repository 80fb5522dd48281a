"""Corpus: data."""
