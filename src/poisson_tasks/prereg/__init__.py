"""The pre-registration: a YAML file that declares a study in full, and the Plan it validates to.

A pre-registration names the model and how it is served, the decoding, the arms, tasks and attempts,
the string the seeds are derived from, the turn limit and horizon, the budget, the concurrency and
every threshold the card uses, before anything runs. `validate_preregistration` refuses a document
with one message per problem, each naming the field; a document that passes becomes a `Plan`.

Seeds. The seed list is derived, never typed in: seed i is the first 8 bytes of
sha256("<seed_string>|<i>") read big-endian, modulo 2**31, taken for i = 0, 1, 2, ... and skipping
any repeat until `tasks` distinct seeds are drawn, kept in that order. The one reserved string
"range" gives 0, 1, ..., tasks-1 instead. `seed_list_hash` is sha256 of the list's canonical JSON
(sorted keys, no spaces). A document may state `seeds` and `seed_list_hash` to publish them; both
are then checked against the derivation.

The API key never enters the file: `model.api_key_env` names the environment variable holding it.

Build pins. An optional `build` section pins the hashes of the instrument (`generator_hash`,
`engine_hash`, as `poisson-tasks validate` prints them): on a build whose hash differs the document
is refused, since it would be measured by a different instrument (other tasks, other
observations). Without the section any build may run it, and the run records the build's hashes.

Ignored keys. `thresholds.bootstrap_resamples` and `thresholds.bootstrap_seed` were read by the
bootstrap intervals the cards no longer use (the intervals are closed-form; nothing resamples). A
document that still has them validates with one note saying they are ignored, and they are left
out of the plan, its hash and the measurement a resumed folder is compared on.

The package is split by job (docs/architecture.md, "The pre-registration"): `schema` (the sections'
models, each field described), `limits` (every size bound), `seeds`, `document` (the raw document's
values and sizes), `sections` (each section parsed on its own), `baseurl`, `checks` (cross-field),
`validate` (the order they run in, to a Plan), `loading` (the file) and `description` (validate's
printout). Everything public is importable from `poisson_tasks.prereg`.
"""

from __future__ import annotations

from poisson_tasks.prereg.baseurl import MAX_URL_CHARS, is_credential_name, url_form_problems
from poisson_tasks.prereg.checks import planned_spec
from poisson_tasks.prereg.description import describe_plan
from poisson_tasks.prereg.document import DATE_FIELDS
from poisson_tasks.prereg.limits import (
    MAX_ARMS,
    MAX_ATTEMPTS,
    MAX_COMPLETION_TOKENS,
    MAX_CONCURRENCY,
    MAX_DEPTH,
    MAX_EPISODES,
    MAX_FILE_BYTES,
    MAX_INT,
    MAX_ITEMS,
    MAX_RETRIES,
    MAX_SECONDS,
    MAX_SEED_STRING,
    MAX_TASKS,
    MAX_TURNS,
    MAX_VALUES,
    MIN_RESOLUTION,
    YAML_LIMITS,
)
from poisson_tasks.prereg.loading import load_preregistration, read_yaml, read_yaml_file
from poisson_tasks.prereg.schema import (
    BUILD_HASHES,
    FORMAT,
    IGNORED_THRESHOLDS,
    PROBE_FORMAT,
    PROVIDERS,
    RESUMABLE_SECTIONS,
    Budget,
    Build,
    Decoding,
    Design,
    Execution,
    Plan,
    Preregistration,
    Rates,
    ReplayDesign,
    Serving,
    Slot,
    Thresholds,
    build_hashes,
    measurement_of,
)
from poisson_tasks.prereg.seeds import RANGE_SEEDS, SEED_MODULUS, derive_seeds, seed_list_hash
from poisson_tasks.prereg.validate import validate_preregistration

__all__ = [
    "BUILD_HASHES",
    "DATE_FIELDS",
    "FORMAT",
    "IGNORED_THRESHOLDS",
    "MAX_ARMS",
    "MAX_ATTEMPTS",
    "MAX_COMPLETION_TOKENS",
    "MAX_CONCURRENCY",
    "MAX_DEPTH",
    "MAX_EPISODES",
    "MAX_FILE_BYTES",
    "MAX_INT",
    "MAX_ITEMS",
    "MAX_RETRIES",
    "MAX_SECONDS",
    "MAX_SEED_STRING",
    "MAX_TASKS",
    "MAX_TURNS",
    "MAX_URL_CHARS",
    "MAX_VALUES",
    "MIN_RESOLUTION",
    "PROBE_FORMAT",
    "PROVIDERS",
    "RANGE_SEEDS",
    "RESUMABLE_SECTIONS",
    "SEED_MODULUS",
    "YAML_LIMITS",
    "Budget",
    "Build",
    "Decoding",
    "Design",
    "Execution",
    "Plan",
    "Preregistration",
    "Rates",
    "ReplayDesign",
    "Serving",
    "Slot",
    "Thresholds",
    "build_hashes",
    "derive_seeds",
    "describe_plan",
    "is_credential_name",
    "load_preregistration",
    "measurement_of",
    "planned_spec",
    "read_yaml",
    "read_yaml_file",
    "seed_list_hash",
    "url_form_problems",
    "validate_preregistration",
]
