"""`open_run(folder)`: a run folder read the one way every command reads it.

The header is read once and held to the pre-registration it stores (header.py); what the run
registered (thresholds, arms, seeds, attempts) is then taken from that document alone, never from
the header's copies; the episode lines are streamed on demand (episodes.py), never held whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from poisson_tasks.prereg import Plan, Thresholds, validate_preregistration
from poisson_tasks.registered import Registered
from poisson_tasks.runfolder.episodes import RecordStream, episode_lines
from poisson_tasks.runfolder.header import RUN_FIRST, read_checked
from poisson_tasks.runfolder.schema import HEADER, EpisodeLine, RunHeader
from poisson_tasks.runfolder.slots import PlanSlots


@dataclass(frozen=True)
class OpenRun:
    """A run folder opened: its checked header, what it registers, and its episodes on demand."""

    path: Path
    header: RunHeader
    registered: Registered

    @property
    def source(self) -> Path:
        """The header's file, as an error line names it."""
        return self.path / HEADER

    @property
    def thresholds(self) -> Thresholds:
        """The thresholds the stored pre-registration registers (the header's copy is held equal
        to them on reading, and never read for a decision)."""
        return self.registered.thresholds

    @cached_property
    def plan(self) -> Plan:
        """The stored pre-registration validated as this install validates one: what `run
        --resume`, `replay` and `merge` run; a document this install refuses is named here."""
        return validate_preregistration(self.header.preregistration, source=str(self.source))

    def slots(self) -> PlanSlots:
        """The plan's slots, empty, for checking this folder's (or another's) lines against."""
        return PlanSlots(self.header)

    def episodes(self) -> Iterator[tuple[int, EpisodeLine]]:
        """(line number, episode) for every complete line, read as it is asked for."""
        return episode_lines(self.path)

    def stream(self) -> RecordStream:
        """One hashed pass over the lines as plain fields (the card's reading)."""
        return RecordStream(self.path)


def open_run(folder: Path | str, fix: str = RUN_FIRST) -> OpenRun:
    """The run folder at `folder`, its header read and checked once: NotARunFolder (its line
    ending in `fix`, what to give instead) where it holds no run, RunFolderError where its header
    is damaged or was edited after its run."""
    path = Path(folder)
    header, registered = read_checked(path, fix)
    return OpenRun(path, header, registered)
