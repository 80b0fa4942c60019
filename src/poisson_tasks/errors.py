"""Every public exception the library raises, under one base; each message names the field and the
fix in one line.

    PoissonError                      exit 2 unless noted: the CLI prints one line and exits
    ├── ArmError (ValueError)         an arm id or ArmSpec the design has no task for
    ├── SeedError (ValueError)        a seed that is not a non-negative integer
    ├── PolicyError (ValueError)      a reference-policy model string or parameter
    ├── PreregistrationError (ValueError)  a pre-registration that does not validate (one line each)
    │   └── ToolFileError             a tool file of the user's own tools that does not validate
    ├── PinError (ValueError)         bundles that do not make one contrast, bad --arms/--seeds
    ├── PinRefusal                    a contrast the pin ledger refuses
    ├── RunFolderError                a run folder that is missing, foreign or damaged
    │   └── NotARunFolder             a folder that holds no run (no run.json)
    ├── EndpointError                 an endpoint that cannot be reached or refuses the credentials
    │   ├── OutOfCredit               the provider says the account is out of credit
    │   └── ArmDoesNotFit             an arm's first request already exceeds the context window
    ├── CallFailed                    one model call failed for good (the episode is api_error)
    │   ├── ContextOverflow           the conversation outgrew the model's context window
    │   └── UnparsedToolCall          the server could not parse a tool call the model wrote
    ├── ReferenceServerError          the reference endpoint could not start
    ├── MissingExtraError             an optional extra is not installed
    ├── LocalServeError               serve-local cannot start (model file, chat template, server)
    ├── CardRefusal                   exit 1: the spec's refusals forbid publishing the card
    ├── PublishedCardError            exit 1: a published card is missing or differs from a rebuild
    └── GeneratorFault (RuntimeError) exit 70: the generator built a task its reference cannot
                                      solve: a bug in this package, never the user's input

    OSError                           what reading a named file raises (files.py); each reader
    ├── NotARegularFile               turns it into one line with files.os_problem
    └── TooLarge
"""

from __future__ import annotations

from typing import Any


def escape_controls(text: str) -> str:
    """`text` with every character that is not printable (str.isprintable: C0 and C1 controls and
    DEL, the line and paragraph separators, format characters such as the bidirectional overrides
    and zero-width spaces, spaces other than U+0020, unassigned code points) written as its Python
    escape (\\n, \\r, \\x1b, \\u202e ...), so a value quoted from the input can neither start a
    second line, drive the terminal, nor reorder the text around it. The one definition of the
    rule: every printed error line passes through it (exits.py), and so does every supplied string
    a card, a page or a terminal prints (supplied.py)."""
    if text.isprintable():  # the usual case: nothing to escape
        return text
    return "".join(char if char.isprintable() else ascii(char)[1:-1] for char in text)


class PoissonError(Exception):
    """Base of every error the CLI turns into one line and a non-zero exit."""

    exit_code = 2


class ArmError(PoissonError, ValueError):
    """An arm id or ArmSpec that the design has no task for."""


class SeedError(PoissonError, ValueError):
    """A seed that is not a non-negative integer."""


class PolicyError(PoissonError, ValueError):
    """A model string or policy parameter the reference endpoint has no policy for."""


class PreregistrationError(PoissonError, ValueError):
    """A pre-registration that does not validate; one message per problem."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


class ToolFileError(PreregistrationError):
    """A tool file of the user's own tools that does not validate; one message per problem."""


class PinError(PoissonError, ValueError):
    """Bundles that do not make one contrast (mixed knobs or seeds, ids that do not match)."""


class PinRefusal(PoissonError):
    """A contrast the pin ledger refuses: its message names the rows, arms and seeds."""


class RunFolderError(PoissonError):
    """A run folder that is missing, from another pre-registration, or damaged."""


class NotARunFolder(RunFolderError):
    """A folder that holds no run (no run.json): the one error every command gives for it
    (runfolder.not_a_run_folder words it)."""


class ShardError(PoissonError):
    """A --shard that does not cut this plan (not i/n, an index out of range, more shards than
    tasks), or a folder resumed as another shard than the one it holds."""


class ReplayError(PoissonError):
    """A replay that cannot be drawn or run: a bad sample size, a folder that is not a run, or a
    replay folder drawn otherwise (exit 2, nothing written)."""


class MergeError(PoissonError):
    """Shard folders that do not make one study: another plan, another instrument, another
    serving, or a slot missing or held twice; the message names which."""


class EndpointError(PoissonError):
    """An endpoint that cannot be reached or refuses the credentials."""


class OutOfCredit(EndpointError):
    """The provider says the account is out of credit (OpenAI's insufficient_quota 429)."""


class CallFailed(PoissonError):
    """A model call that failed for good: the episode is api_error (an instrument failure)."""

    def __init__(
        self,
        detail: str,
        retries: int,
        seconds: float = 0.0,
        evidence: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retries = retries
        self.seconds = seconds
        self.evidence = evidence or []


class ContextOverflow(CallFailed):
    """The server says the conversation outgrew the model's context window (an HTTP 400)."""

    def __init__(
        self,
        detail: str,
        retries: int,
        seconds: float = 0.0,
        evidence: list[dict[str, Any]] | None = None,
        window: int | None = None,
    ) -> None:
        super().__init__(detail, retries, seconds, evidence)
        self.window = window


class UnparsedToolCall(CallFailed):
    """The server could not parse a tool call the model wrote (llama.cpp answers HTTP 500 "Failed
    to parse tool call arguments as JSON", on the reply itself or when the call comes back in the
    history): the model's malformed call, format clause 1, never an instrument failure."""


class ReferenceServerError(PoissonError):
    """The reference endpoint could not start (an address in use, a bad option)."""


class MissingExtraError(PoissonError):
    """A feature whose optional dependency is missing; the message names the extra to install."""


class ArmDoesNotFit(EndpointError):
    """An arm whose first request already exceeds the served model's context window."""


class CardRefusal(PoissonError):
    """A card the spec's refusals forbid publishing (exit 1)."""

    exit_code = 1


class PublishedCardError(PoissonError):
    """A published card that is missing or differs from a rebuild from its records (exit 1)."""

    exit_code = 1


class GeneratorFault(PoissonError, RuntimeError):
    """The generator produced a task its own reference cannot solve: a bug, never the user's input."""

    exit_code = 70


class Interrupted(PoissonError):
    """A run stopped by SIGINT or SIGTERM after recording what it did; exit 128 + the signal."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum


class OutputError(PoissonError):
    """A file that cannot be written: a full disk, a read-only folder, a directory in the way."""


class LocalServeError(PoissonError):
    """serve-local cannot start: no model file, a refused chat template, a server that fails."""


class NotARegularFile(OSError):
    """A path that names a directory, a FIFO, a device or a socket where a file is read."""


class TooLarge(OSError):
    """A file (or one line of it) longer than its documented limit."""
