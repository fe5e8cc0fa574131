"""Results written by the one generic conversion and read back into the same types."""

from __future__ import annotations

import json
from typing import Any

from solvers.results.records import from_json, to_json


def round_trip(result: Any) -> dict[str, Any]:
    """The JSON record of `result` (strict JSON: no NaN tokens); asserts that reading it
    back gives an object of the same type that writes the same record."""
    record = json.loads(json.dumps(to_json(result), allow_nan=False))
    back = from_json(type(result), record)
    assert type(back) is type(result)
    assert to_json(back) == record
    return record
