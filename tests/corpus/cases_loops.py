"""Corpus: loops."""
