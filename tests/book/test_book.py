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


def test_the_wide_table_stylesheet_is_in_the_book():
    """Wide tables (Table 1 with the paper's columns) fit the content column: ``_config.yml`` names a stylesheet
    found in its static path that styles the tables inside the theme's scrollable container, where the
    directive above is rendered."""
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[2]
    config = yaml.safe_load((root / "_config.yml").read_text())["sphinx"]["config"]
    found = {name: [root / folder / name for folder in config["html_static_path"] if (root / folder / name).is_file()]
             for name in config["html_css_files"]}
    assert all(found.values()), f"stylesheets named in _config.yml but not in its html_static_path: {found}"
    assert ".pst-scrollable-table-container table" in found["tables.css"][0].read_text()
