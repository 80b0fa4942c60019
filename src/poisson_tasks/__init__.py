"""poisson-tasks: generated tool-use tasks, a pure verifier, a pin ledger, pre-registered studies, cards."""

from __future__ import annotations

__version__ = "0.1.0"
