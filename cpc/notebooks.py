"""A notebook read as a script: its code cells in order, a blank line between them.

A cursor in a notebook's cell writes code that runs after the cells above
it: the names it uses were defined there, as in the lines above a cursor in
a script. Read alone, a cell hides them from the model. Jupyter's export to
a script (``jupyter nbconvert --to script``) joins the code cells with blank
lines and leaves the markdown out; `script` does the same without its
``# In[ ]:`` markers, which the model would read as code. The server reads
an open notebook's cells this way around a cursor (`Script.around`), and
the folder walk reads an ``.ipynb`` file's code this way (`ipynb_script`)
instead of its JSON (escaped source, outputs, base64 images).

>>> script(["import numpy as np\\n", "x = np.ones(3)"])
'import numpy as np\\n\\nx = np.ones(3)\\n'
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

CELL_BREAK = "\n\n"
"""What ends each code cell in the script: its line's end and a blank line."""


def script(cells: Sequence[str]) -> str:
    """The code ``cells`` as one script: each without its trailing line breaks, followed by `CELL_BREAK`, and
    the last by one line break; blank cells left out.

    >>> script(["a = 1\\n\\n\\n", "   ", "b = a\\n"])
    'a = 1\\n\\nb = a\\n'
    """
    parts = [cell.rstrip("\r\n") for cell in cells if cell.strip()]
    return CELL_BREAK.join(parts) + "\n" if parts else ""


@dataclass(frozen=True)
class Script:
    """The text the engine reads for one cell of a notebook: the code cells before it and after it around
    the cell's own text, which stays as it is (positions in it keep their meaning)."""

    before: str
    cell: str
    after: str

    @classmethod
    def around(cls, cells: Sequence[str], index: int) -> Script:
        """Cell ``index`` of the code ``cells`` with the others around it as `script` joins them.

        >>> around = Script.around(["import os\\n", "os.pa", "print(x)"], 1)
        >>> around.text, around.start
        ('import os\\n\\nos.pa\\n\\nprint(x)\\n', 11)
        """
        before, after = script(cells[:index]), script(cells[index + 1:])
        return cls(before + "\n" if before else "", cells[index], CELL_BREAK + after if after else "")

    @property
    def text(self) -> str:
        return self.before + self.cell + self.after

    @property
    def start(self) -> int:
        """Where the cell starts in `text`."""
        return len(self.before)


def ipynb_script(text: str) -> str | None:
    """The code cells of a Jupyter notebook file (nbformat 4's JSON) as a `script`; None when ``text`` is
    not one.

    >>> ipynb_script('{"cells": [{"cell_type": "markdown", "source": ["# Title"]},'
    ...              ' {"cell_type": "code", "source": ["import os\\\\n", "os.getcwd()"], "outputs": []}]}')
    'import os\\nos.getcwd()\\n'
    >>> ipynb_script('{"not": "a notebook"}') is None
    True
    """
    try:
        notebook = json.loads(text)
    except ValueError:
        return None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        return None
    return script([_source(cell) for cell in cells if isinstance(cell, dict) and cell.get("cell_type") == "code"])


def _source(cell: dict) -> str:
    """A cell's source: nbformat stores a string or a list of lines."""
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(part for part in source if isinstance(part, str))
    return source if isinstance(source, str) else ""
