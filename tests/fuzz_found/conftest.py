"""Reproductions written by ``python -m s2sad.fuzz``: scripts to run by hand, not tests."""

collect_ignore_glob = ["*.py"]
