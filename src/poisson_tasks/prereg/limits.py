"""Bounds on every size a user can write in a pre-registration, checked at validate time (the
limit is in each message), and the ones the YAML reader holds while it composes the document."""

from __future__ import annotations

from poisson_tasks.yamlfile import YamlLimits

# Bounds on every size a user can write (checked at validate time, the limit in the message).
MAX_FILE_BYTES = 1 << 20  # a pre-registration is a page of YAML; 1 MiB is far beyond any real one
MAX_DEPTH = 32  # nesting of mappings and lists
MAX_INT = 2**53  # every integer fits a JSON number exactly
MAX_TASKS = 100_000
MAX_SEED_STRING = 1_000  # characters
MAX_ATTEMPTS = 1_000
MAX_ARMS = 500
MAX_EPISODES = 1_000_000  # arms x tasks x attempts: the plan's slots are held in memory
MAX_TURNS = 1_000  # turn_limit, slack and horizon
MAX_COMPLETION_TOKENS = 10_000_000
MAX_CONCURRENCY = 1_024
MAX_RETRIES = 100
MAX_SECONDS = 10_000_000.0  # about 116 days: any wall-clock, timeout or backoff
MIN_RESOLUTION = 0.01  # a finer declared resolution needs more tasks than MAX_TASKS allows
MAX_ITEMS = MAX_TASKS  # entries in any one list or mapping (the longest list: design.seeds)
MAX_VALUES = MAX_ITEMS + 10_000  # values in the whole document: its longest list and a page more
# Checked while the YAML is read, before anything is built from it (yamlfile.py), so a file of
# 100,000 arms is refused at its 501st, not parsed whole first.
YAML_LIMITS = YamlLimits(
    values=MAX_VALUES, items=MAX_ITEMS, paths={"design.arms": (MAX_ARMS, "arms")}
)
