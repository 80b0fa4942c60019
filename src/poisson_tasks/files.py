"""Atomic file writes: a reader (or a crash, a kill, a full disk) sees the old file or the new one.

`atomic_write` writes to a temporary file in the target's own folder (so the rename never crosses
a file system), fsyncs it, renames it over the target and fsyncs the folder. On any failure the
temporary file is removed and the target is left as it was (or absent), and the OSError is raised
for the caller to turn into one line. `os_problem` gives that line's reason.

Reading what a user names: `open_regular` opens a path only when it is a regular file (a
directory, a FIFO, /dev/zero or a socket is refused at once, never read or waited on), and
`read_limited` reads such a file up to its documented size limit, refusing a larger one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from poisson_tasks.errors import NotARegularFile, TooLarge

__all__ = [
    "atomic_write",
    "fsync_dir",
    "lines_limited",
    "open_regular",
    "os_problem",
    "read_limited",
]


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for reading in binary, only when it is a regular file (a symbolic link to one
    is followed). Opened without blocking, so a FIFO with no writer is refused, not waited on;
    NotARegularFile says what it is instead."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFile(errno.EINVAL, f"is {_kind(mode)}, not a file", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_limited(path: Path, limit: int) -> bytes:
    """A regular file's bytes, at most `limit` of them; TooLarge for a longer file (read no
    further than limit + 1 bytes), NotARegularFile for anything but a file."""
    with open_regular(path) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(errno.EFBIG, f"is larger than {limit:,} bytes", str(path))
    return data


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


def lines_limited(fh: BinaryIO, limit: int, name: str = "") -> Iterator[bytes]:
    """The lines of `fh` (the last one may lack its newline), each read no further than `limit`
    bytes: a longer line raises TooLarge instead of filling memory."""
    readline = fh.readline
    while True:
        raw = readline(limit + 1)
        if not raw:
            return
        if len(raw) > limit:
            raise TooLarge(errno.EFBIG, f"holds a line longer than {limit:,} bytes", name)
        yield raw
