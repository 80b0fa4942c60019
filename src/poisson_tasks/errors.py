"""The typed exceptions the library raises; each message names the field and the fix in one line."""

from __future__ import annotations


class PoissonError(Exception):
    """Base of every error the CLI turns into one line and a non-zero exit."""

    exit_code = 2


class ArmError(PoissonError, ValueError):
    """An arm id or ArmSpec that the design has no task for."""


class SeedError(PoissonError, ValueError):
    """A seed that is not a non-negative integer."""


class PreregistrationError(PoissonError, ValueError):
    """A pre-registration that does not validate; one message per problem."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


class ToolFileError(PreregistrationError):
    """A tool file of the user's own tools that does not validate; one message per problem."""


class RunFolderError(PoissonError):
    """A run folder that is missing, from another pre-registration, or damaged."""


class EndpointError(PoissonError):
    """An endpoint that cannot be reached or refuses the credentials."""


class CardRefusal(PoissonError):
    """A card the spec's refusals forbid publishing (exit 1)."""

    exit_code = 1


class PublishedCardError(PoissonError):
    """A published card that is missing or differs from a rebuild from its records (exit 1)."""

    exit_code = 1


class MissingExtraError(PoissonError):
    """A feature whose optional dependency is missing; the message names the extra to install."""
