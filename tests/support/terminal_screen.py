"""A terminal's screen as a PNG: ``tmux capture-pane -e`` text (SGR colour escapes kept) drawn cell by cell.

What the real terminal showed, character for character and colour for colour,
with Pillow and the DejaVu Sans Mono that matplotlib ships (no font package
needed). Used by tests/editors/test_neovim.py for the README's picture of Neovim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

import matplotlib
from PIL import Image, ImageDraw, ImageFont

FONT_DIR = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
FONT_SIZE = 16
DEFAULT_FG = (212, 212, 212)
DEFAULT_BG = (20, 22, 27)
# xterm's 16 colours
BASIC = [
    (0, 0, 0), (205, 0, 0), (0, 205, 0), (205, 205, 0), (0, 0, 238), (205, 0, 205), (0, 205, 205), (229, 229, 229),
    (127, 127, 127), (255, 0, 0), (0, 255, 0), (255, 255, 0), (92, 92, 255), (255, 0, 255), (0, 255, 255), (255, 255, 255),
]
_ESCAPE = re.compile(r"\x1b\[([0-9;:]*)m")


@dataclass(frozen=True)
class Style:
    fg: tuple[int, int, int] | None = None
    bg: tuple[int, int, int] | None = None
    bold: bool = False
    italic: bool = False
    reverse: bool = False


def xterm_256(n: int) -> tuple[int, int, int]:
    """The RGB of xterm's 256-colour palette entry ``n``."""
    if n < 16:
        return BASIC[n]
    if n < 232:
        n -= 16
        levels = [0, 95, 135, 175, 215, 255]
        return levels[n // 36], levels[n // 6 % 6], levels[n % 6]
    grey = 8 + 10 * (n - 232)
    return grey, grey, grey


def apply_sgr(style: Style, parameters: str) -> Style:
    """``style`` after one SGR sequence's parameters (``1;38;5;244``; ``:`` separators read as ``;``)."""
    codes = [int(code) if code else 0 for code in parameters.replace(":", ";").split(";")]
    k = 0
    while k < len(codes):
        code = codes[k]
        if code == 0:
            style = Style()
        elif code == 1:
            style = replace(style, bold=True)
        elif code == 3:
            style = replace(style, italic=True)
        elif code == 7:
            style = replace(style, reverse=True)
        elif code == 22:
            style = replace(style, bold=False)
        elif code == 23:
            style = replace(style, italic=False)
        elif code == 27:
            style = replace(style, reverse=False)
        elif 30 <= code <= 37 or 90 <= code <= 97:
            style = replace(style, fg=BASIC[code - 30 if code < 90 else code - 82])
        elif 40 <= code <= 47 or 100 <= code <= 107:
            style = replace(style, bg=BASIC[code - 40 if code < 100 else code - 92])
        elif code == 39:
            style = replace(style, fg=None)
        elif code == 49:
            style = replace(style, bg=None)
        elif code in (38, 48) and k + 1 < len(codes):
            if codes[k + 1] == 5 and k + 2 < len(codes):
                color, k = xterm_256(codes[k + 2]), k + 2
            elif codes[k + 1] == 2 and k + 4 < len(codes):
                color, k = tuple(codes[k + 2 : k + 5]), k + 4
            else:
                color = None
            style = replace(style, **{"fg" if code == 38 else "bg": color})
        k += 1
    return style


def parse(screen: str) -> list[list[tuple[str, Style]]]:
    """Rows of (character, style) cells from capture-pane's text."""
    rows = []
    style = Style()
    for line in screen.split("\n"):
        cells = []
        position = 0
        for match in _ESCAPE.finditer(line):
            cells.extend((char, style) for char in line[position : match.start()])
            style = apply_sgr(style, match.group(1))
            position = match.end()
        cells.extend((char, style) for char in line[position:])
        rows.append(cells)
    return rows


def render(screen: str, path: Path, columns: int, lines: int, cursor: tuple[int, int] | None = None) -> None:
    """Draw ``screen`` (``tmux capture-pane -p -e`` output of a ``columns`` x ``lines`` pane) into the PNG ``path``.

    ``cursor`` (column, line), as tmux reports it, is drawn as a bar: capture-pane leaves it out.
    """
    fonts = {
        (bold, italic): ImageFont.truetype(str(FONT_DIR / f"DejaVuSansMono{suffix}.ttf"), FONT_SIZE)
        for (bold, italic), suffix in {
            (False, False): "", (True, False): "-Bold", (False, True): "-Oblique", (True, True): "-BoldOblique",
        }.items()
    }
    width = round(fonts[False, False].getlength("M"))
    ascent, descent = fonts[False, False].getmetrics()
    height = ascent + descent + 2
    image = Image.new("RGB", (columns * width, lines * height), DEFAULT_BG)
    draw = ImageDraw.Draw(image)
    for row, cells in enumerate(parse(screen)[:lines]):
        for column, (char, style) in enumerate(cells[:columns]):
            fg, bg = style.fg or DEFAULT_FG, style.bg or DEFAULT_BG
            if style.reverse:
                fg, bg = bg, fg
            x, y = column * width, row * height
            if bg != DEFAULT_BG:
                draw.rectangle((x, y, x + width - 1, y + height - 1), fill=bg)
            if char != " ":
                draw.text((x, y + 1), char, font=fonts[style.bold, style.italic], fill=fg)
    if cursor is not None:
        x, y = cursor[0] * width, cursor[1] * height
        draw.rectangle((x, y, x + 1, y + height - 1), fill=DEFAULT_FG)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
