"""Writing a run folder: the header replaced atomically, episode lines appended and fsynced, one
writer at a time (an exclusive lock on run.lock), and what a kill or a failed creation leaves
behind cleaned: a torn last line cut before appending, a half-made folder removed.

The runner's session loop (runner/folder.py) drives these; every byte a run folder holds is
written here.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from poisson_tasks.errors import RunFolderError
from poisson_tasks.files import atomic_write, os_problem, write_all
from poisson_tasks.runfolder.schema import EPISODES, HEADER, EpisodeLine, RunHeader

LOCK = "run.lock"
TEMPORARY_PREFIX = f".{HEADER}."  # atomic_write's temporary files for run.json


def now() -> str:
    """The time a folder records (a session's start and end, a lock's taker, a merge): UTC, to
    the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_header(folder: Path, header: RunHeader) -> None:
    """Replace run.json atomically so a kill or a full disk never leaves half a header."""
    folder.mkdir(parents=True, exist_ok=True)
    data = json.dumps(header.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    atomic_write(folder / HEADER, data.encode("utf-8"))


def append_episode(fh: Any, line: EpisodeLine) -> None:
    """Append one episode line and flush it to disk before the next episode is counted."""
    fh.write(line.model_dump_json().encode() + b"\n")
    fh.flush()
    os.fsync(fh.fileno())


class FolderLock:
    """An exclusive flock on `<folder>/run.lock`, held for a writer's life; see the module doc."""

    def __init__(self, folder: Path, fd: int) -> None:
        self.folder = folder
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, folder: Path) -> FolderLock:
        """Take the folder's lock or raise RunFolderError naming the writer that holds it."""
        path = folder / LOCK
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise RunFolderError(
                f"{folder}: cannot make its lock file {LOCK}: {os_problem(exc)}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(fd)
            os.close(fd)
            raise RunFolderError(
                f"{folder} is being written by another poisson-tasks ({holder}): one writer at "
                "a time; wait for it to finish or stop it, then run again"
            ) from None
        try:
            me = {"pid": os.getpid(), "host": socket.gethostname(), "started_at": now()}
            os.ftruncate(fd, 0)
            write_all(fd, (json.dumps(me, sort_keys=True) + "\n").encode())
            os.fsync(fd)
        except OSError as exc:
            os.close(fd)  # closing drops the lock
            raise RunFolderError(
                f"{folder}: cannot write its lock file {LOCK}: {os_problem(exc)}"
            ) from None
        return cls(folder, fd)

    def release(self) -> None:
        """Drop the lock (the file stays for the next writer to take)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _holder(fd: int) -> str:
    """Who holds a lock, as its file says: pid, host and start time."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        return f"pid {info['pid']} on {info['host']}, started {info['started_at']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a writer that has not yet recorded its pid"


def is_empty(path: Path) -> bool:
    """A folder with nothing in it but a lock file left behind."""
    return all(p.name == LOCK for p in path.iterdir())


def remove_partial(path: Path, made: bool) -> None:
    """Remove what a failed creation left (never anything it did not make)."""
    for leftover in path.iterdir() if path.is_dir() else []:
        if leftover.name in (HEADER, EPISODES) or leftover.name.startswith(TEMPORARY_PREFIX):
            with contextlib.suppress(OSError):
                leftover.unlink()
    if made:
        with contextlib.suppress(OSError):
            (path / LOCK).unlink()
            path.rmdir()


def truncate_torn_tail(path: Path) -> int:
    """Cut a last line that a kill left without its newline; returns the bytes removed."""
    if not path.exists():
        return 0
    with path.open("r+b") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return 0
        chunk = 1 << 16
        pos = size
        keep = 0
        while pos > 0:
            start = max(0, pos - chunk)
            fh.seek(start)
            block = fh.read(pos - start)
            newline_at = block.rfind(b"\n")
            if newline_at >= 0:
                keep = start + newline_at + 1
                break
            pos = start
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
        return size - keep
