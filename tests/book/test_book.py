"""Tables the book numbers: a MyST table directive, no "NaN", pipes escaped."""
import numpy as np
import pandas as pd

from helpers.presentation.book import MISSING, table


def test_table_directive_without_nan():
    frame = pd.DataFrame([{"system": "a|b", "all": 65.0, "paper": np.nan}, {"system": "c", "all": 222, "paper": None}],
                         dtype=object).set_index("system")
    text = table(frame, name="tbl-x", caption="A caption.").data
    lines = text.splitlines()
    assert lines[0] == "```{table} A caption." and lines[1] == ":name: tbl-x" and lines[-1] == "```"
    assert "nan" not in text.lower() and text.count(MISSING) == 2
    assert "| a\\|b | 65.0 | — |" in lines and "| c | 222 | — |" in lines
    assert lines[3] == "| system | all | paper |"
