"""Worker processes that end with their parent: a killed command leaves no process behind.

A forked ProcessPoolExecutor worker waits on its call queue, whose pipe it holds both ends of, so
it never sees its parent go: killed with SIGKILL, the parent would leave every worker running.
`die_with_parent` is the pools' initializer (pins.plan, view.gather).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent: int) -> None:
    """In a worker process: end (SIGKILL) when the process `parent` ends, so a killed command
    leaves no worker behind. Linux's prctl(PR_SET_PDEATHSIG); elsewhere a no-op. A parent that
    died before the call is caught by comparing getppid() with `parent`."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            return
    if os.getppid() != parent:
        os._exit(1)
