"""The pre-registration schema documents itself: every field of every section has a description
(docs/commands.md's example comments the same fields)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from poisson_tasks.prereg import (
    Budget,
    Build,
    Decoding,
    Design,
    Execution,
    Preregistration,
    Rates,
    ReplayDesign,
    Serving,
    Thresholds,
)


@pytest.mark.parametrize(
    "model",
    [
        Preregistration,
        Serving,
        Rates,
        Decoding,
        Design,
        ReplayDesign,
        Budget,
        Execution,
        Thresholds,
        Build,
    ],
)
def test_every_field_of_the_schema_has_a_description(model: type[BaseModel]) -> None:
    bare = [name for name, field in model.model_fields.items() if not field.description]
    assert bare == [], f"{model.__name__}: fields without a description: {bare}"
