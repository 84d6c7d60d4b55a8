"""JSON text for results and cache files: NaN and infinities are refused (JSON has neither).

>>> strict_dumps({"uas": 81.2})
'{"uas": 81.2}'
>>> strict_dumps({"rows": [1.0, float("nan")]})
Traceback (most recent call last):
...
ValueError: refusing to write nan at rows[1]: JSON has no NaN or Infinity (an undefined number should be null)
>>> nan_to_null({"rows": [1.0, float("nan")]})
{'rows': [1.0, None]}
"""
from __future__ import annotations

import json
import math


def strict_dumps(payload, **kwargs) -> str:
    """``json.dumps`` that refuses NaN and infinities with a ``ValueError`` naming where the first one is."""
    try:
        return json.dumps(payload, allow_nan=False, **kwargs)
    except ValueError as err:
        where = non_finite(payload)
        if where is None:
            raise
        raise ValueError(f"refusing to write {where[1]} at {where[0] or 'the top level'}: JSON has no NaN or "
                         "Infinity (an undefined number should be null)") from err


def non_finite(value, path: str = "") -> tuple[str, float] | None:
    """``(path, value)`` of the first NaN or infinity inside ``value``, e.g. ``("rows.Attn.mean", nan)``."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    if isinstance(value, dict):
        items = ((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for sub_path, item in items:
        found = non_finite(item, sub_path)
        if found is not None:
            return found
    return None


def nan_to_null(value):
    """``value`` with every NaN or infinite float replaced by ``None``: an undefined number (e.g. an
    accuracy over zero mentions) is ``null`` in JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: nan_to_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [nan_to_null(v) for v in value]
    return value
