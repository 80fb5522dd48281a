"""The directory of the s2sad cache and how its files are written and trusted.

The directory must be private (cached files are executed): :func:`cache_dir`
creates it so or refuses one that other users could write to; :func:`trusted`
tells whether a file in it is the current user's own; :func:`write_atomic`
writes files that no reader sees half-written; :func:`write_code` and
:func:`read_code` keep a module's compiled code object beside it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import stat
import sys
import tempfile
import types
from pathlib import Path

from s2sad.errors import S2SADError
from s2sad.paths import user_cache_dir


class UnsafeCacheDirError(S2SADError, PermissionError):
    """Another user could write to the cache directory: its files are not trusted."""


class CacheDirError(S2SADError, OSError):
    """The cache directory cannot be created (a file is in the way, no permission)."""


def default_cache_dir() -> Path:
    """The platform's user cache directory for s2sad (see s2sad.paths)."""
    return user_cache_dir()


def cache_dir() -> Path:
    """``$S2SAD_CACHE_DIR`` (or ~/.cache/s2sad): created private, or checked private."""
    env = os.environ.get("S2SAD_CACHE_DIR")
    path = Path(env).expanduser() if env else default_cache_dir()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise CacheDirError(
            f"cannot create the s2sad cache {path}: {exc.strerror or exc}. Set "
            "S2SAD_CACHE_DIR to a directory you can write to."
        ) from None
    check_private(path, ours=not env)
    return path


def check_private(path: Path, ours: bool = False) -> None:
    """Refuse a directory that another user owns or that group/others may write to.

    ``ours`` marks the default directory: s2sad (or its dataset cache) created
    it, possibly under a permissive umask, so write access is taken away from
    group and others instead of refusing.
    """
    st = path.stat()
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeCacheDirError(f"s2sad cache {path} is not a directory")
    if not hasattr(os, "getuid"):  # Windows: no POSIX owners or mode bits to check
        return
    if st.st_uid != os.getuid():
        raise UnsafeCacheDirError(
            f"refusing to use the s2sad cache {path}: it belongs to another user (uid "
            f"{st.st_uid}), who could put code in it that s2sad would run. Set "
            "S2SAD_CACHE_DIR to a directory of your own."
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        if ours:
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~(stat.S_IWGRP | stat.S_IWOTH))
            return
        fix = (
            "set S2SAD_CACHE_DIR to a directory of your own, e.g. "
            f"{default_cache_dir()}"
            if st.st_mode & stat.S_ISVTX  # a shared directory such as /tmp
            else f"run 'chmod go-w {path}' or set S2SAD_CACHE_DIR to a private "
            "directory"
        )
        raise UnsafeCacheDirError(
            f"refusing to use the s2sad cache {path}: other users can write to it "
            f"(mode {stat.S_IMODE(st.st_mode):o}) and s2sad runs the files it finds "
            f"there. To fix it, {fix}."
        )


def trusted(st: os.stat_result) -> bool:
    """A cached file only the current user could have written."""
    if not hasattr(os, "getuid"):
        return True
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


_UTF8 = {"encoding": "utf-8"}


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write ``text`` to ``path`` so that no reader ever sees a partial file.

    The temporary file (mode 0600, same directory) is flushed to disk before it
    is renamed over ``path``; concurrent writers of the same path each rename a
    complete file, and the last one wins.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".py")
    try:
        binary = isinstance(text, bytes)
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else _UTF8)) as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def code_path(path: Path) -> Path:
    """Where the code object of the cached module ``path`` is kept."""
    return path.with_name(f"{path.stem}.{_python_tag()}.code")


def _python_tag() -> str:
    return sys.implementation.cache_tag or sys.implementation.name


def code_header(path: Path, digest: str, payload: bytes) -> bytes:
    """The first line of a code file: everything that must match before it runs."""
    magic = importlib.util.MAGIC_NUMBER.hex()
    check = hashlib.sha256(payload).hexdigest()
    return f"s2sad-code {_python_tag()} {magic} {digest} {check} {path}\n".encode()


def write_code(path: Path, digest: str, code: types.CodeType) -> None:
    """Store ``code`` (compiled from the module text hashed ``digest``) beside
    ``path``; best effort: a cache that cannot take it still works."""
    payload = marshal.dumps(code)
    try:
        write_atomic(code_path(path), code_header(path, digest, payload) + payload)
    except OSError:
        pass


def read_code(path: Path, digest: str) -> types.CodeType | None:
    """The stored code object of ``path``'s module text ``digest``, or None when
    there is none, or it is not trusted, damaged, or made for another Python, text
    or file name."""
    try:
        with open(code_path(path), "rb") as f:
            if not trusted(os.fstat(f.fileno())):
                return None
            data = f.read()
    except OSError:
        return None
    first, sep, payload = data.partition(b"\n")
    if not sep or first + sep != code_header(path, digest, payload):
        return None
    try:
        code = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    if not isinstance(code, types.CodeType) or code.co_filename != str(path):
        return None
    return code
