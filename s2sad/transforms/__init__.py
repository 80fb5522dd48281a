"""Compiler passes, one per module; `s2sad.pipeline.PASSES` orders them."""
