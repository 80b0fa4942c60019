"""The run folder: `run.json` (the header) and `episodes.jsonl` (one line per episode).

One package owns it: its schema (schema.py, with the serving record in serving.py), the
header's reading and check (header.py),
the episode lines' one reader (episodes.py), its one writer (writer.py: header, lines, lock,
what a kill leaves), the plan's slots (slots.py), and `open_run` (reader.py), which every
command that reads a folder goes through. The runner's session loop (runner/folder.py) drives
the writer; calibration reads through open_run.

A run folder is append-only: episode lines are written as each episode ends and fsynced in
batches (runner/folder.py), and the header is replaced atomically (write, fsync, rename), so a
crash or kill never leaves it half-written.

Slots and resuming. A slot is one planned (arm_id, seed, attempt), attempts numbered from 0. A
slot holds at most one *scored* line (outcome not in verifier.INSTRUMENT_OUTCOMES). An instrument
failure (api_error, wall_timeout, replay_mismatch, verifier_error) is written the moment it happens
and is never removed or rewritten; a resumed session (`poisson-tasks run --resume`) runs a fresh
attempt for every slot with no scored line, including slots whose only lines are instrument
failures, and marks it resumed=True with its session index. A reader therefore counts each
instrument failure in its cell's instrument rate and scores the slot by its one scored line, and a
resumed run cannot hide a failure. A slot with no line at all (the run stopped, was killed, or the
episode was in flight) is simply not run yet. A kill can leave a torn last line: readers skip it,
and the runner truncates it before appending.

A header read is a header checked. run.json stores the pre-registration its run was made with,
its hash, and copies of what it registers (thresholds, arms, seeds, attempts; for a shard or a
merge the plan hash and the count of shards). read_header holds each copy to the value recomputed
from the stored document (registered.py) and the document to its hash (check_header), so what a
card or a merge decides with is what was registered; a folder edited after its run, here or on
another machine, is refused in one line naming the field.

Budgets. Token and dollar caps count every episode line in the folder plus each session's abandoned
usage (episodes cut off in flight by a stop); the wall-clock cap is per session.

Shards. A folder made by `run --shard i/n` records `shard` (ShardRecord) and holds only its
shard's slots, within its share of the caps; a folder made by `merge` records `merged`
(MergeRecord) and holds every shard's lines, sessions renumbered. A whole run's header has neither
key, so its bytes are as they were before shards existed.

Replays. `poisson-tasks replay RUN_DIR` runs a seeded sample of the run's scored slots again into
the folder RUN_DIR/replay/ (REPLAY), a run folder of its own whose header records `replay`
(ReplayRecord): the sample's size, seed, rule and slots. A run's own header never has that key.

Cards. `poisson-tasks card` writes a run's card into RUN_DIR/card/ (CARD_DIR), whether it ran the
run or was given its folder (calibration/output.py).
"""

from __future__ import annotations

from poisson_tasks.runfolder.episodes import (
    RecordStream,
    episode_lines,
    iter_episodes,
    records_sha256,
)
from poisson_tasks.runfolder.header import (
    RUN_FIRST,
    check_header,
    is_run_folder,
    not_a_run_folder,
    read_checked,
    read_header,
)
from poisson_tasks.runfolder.reader import (
    OpenRun,
    open_run,
)
from poisson_tasks.runfolder.schema import (
    CARD_DIR,
    EPISODES,
    EPISODES_GZ,
    FORMAT,
    HEADER,
    HEADER_MAX_BYTES,
    LINE_MAX_BYTES,
    REPLAY,
    STOP_WORDS,
    USAGE_UNCACHED_KEYS,
    EpisodeLine,
    MergedShard,
    MergeRecord,
    OwnToolsRecord,
    PacingRecord,
    ReplayRecord,
    RunHeader,
    Session,
    ShardRecord,
    StopReason,
    Timing,
    Usage,
    stop_words,
    uncached_input,
)
from poisson_tasks.runfolder.serving import MAX_CONTEXT_WINDOW, ServingRecord
from poisson_tasks.runfolder.slots import (
    PlanSlots,
)
from poisson_tasks.runfolder.writer import (
    LOCK,
    TEMPORARY_PREFIX,
    FolderLock,
    append_episode,
    is_empty,
    now,
    remove_partial,
    truncate_torn_tail,
    write_header,
)

__all__ = [
    "CARD_DIR",
    "EPISODES",
    "EPISODES_GZ",
    "FORMAT",
    "HEADER",
    "HEADER_MAX_BYTES",
    "LINE_MAX_BYTES",
    "LOCK",
    "MAX_CONTEXT_WINDOW",
    "REPLAY",
    "RUN_FIRST",
    "STOP_WORDS",
    "TEMPORARY_PREFIX",
    "USAGE_UNCACHED_KEYS",
    "EpisodeLine",
    "FolderLock",
    "MergeRecord",
    "MergedShard",
    "OpenRun",
    "OwnToolsRecord",
    "PacingRecord",
    "PlanSlots",
    "RecordStream",
    "ReplayRecord",
    "RunHeader",
    "ServingRecord",
    "Session",
    "ShardRecord",
    "StopReason",
    "Timing",
    "Usage",
    "append_episode",
    "check_header",
    "episode_lines",
    "is_empty",
    "is_run_folder",
    "iter_episodes",
    "not_a_run_folder",
    "now",
    "open_run",
    "read_checked",
    "read_header",
    "records_sha256",
    "remove_partial",
    "stop_words",
    "truncate_torn_tail",
    "uncached_input",
    "write_header",
]
