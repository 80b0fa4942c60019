"""Atomic file writes: a reader (or a crash, a kill, a full disk) sees the old file or the new one.

`atomic_write` writes to a temporary file in the target's own folder (so the rename never crosses
a file system), fsyncs it, renames it over the target and fsyncs the folder. On any failure the
temporary file is removed and the target is left as it was (or absent), and the OSError is raised
for the caller to turn into one line. `os_problem` gives that line's reason.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write", "fsync_dir", "os_problem"]


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new file in `folder` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """os.write until every byte is written (a short write is not an error)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` atomically (temporary file in the same folder, fsync, rename)."""
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def os_problem(exc: OSError) -> str:
    """The reason an OSError gives, with a hint for the usual environment failures."""
    reason = exc.strerror or type(exc).__name__
    hints = {
        errno.ENOSPC: "the disk is full: free space",
        errno.EDQUOT: "the disk quota is used up: free space",
        errno.EROFS: "the file system is read-only: choose a writable folder",
        errno.EACCES: "permission denied: choose a folder you can write",
        errno.EPERM: "permission denied: choose a folder you can write",
        errno.EISDIR: "a directory is in the way: move it",
        errno.ENOTDIR: "a file is in the way of a folder: move it",
    }
    hint = hints.get(exc.errno or -1)
    return f"{reason}; {hint}" if hint else reason
