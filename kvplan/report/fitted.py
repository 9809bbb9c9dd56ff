"""Tables that fit the terminal without cutting a cell: every table kvplan prints is a `fitted_table`.

rich alone, at 80 columns, shrinks a wrapping column to nothing (a GPU column vanished from `cheapest`)
and, as a last resort, cuts numbers with '…'. A fitted table sets every column's width itself when the
table would not fit at its natural width: a number or a key is never narrower than its widest cell, a
name or a sentence wraps only between words (never inside a name), a header wraps between its words;
when even that does not fit, the columns the caller marked `optional` are left out, in the order given,
and the table's caption says which (the JSON output has them all).
"""

from __future__ import annotations

import re
import textwrap
from functools import lru_cache


def _plain(cell) -> str:
    from rich.text import Text

    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        try:
            return Text.from_markup(cell).plain
        except Exception:  # noqa: BLE001 - not markup: measured as it is
            return cell
    return str(cell)


_BREAK = re.compile(r"[^\s\-/_]*[\-/_]+|\S+")  # a piece of a name: up to a hyphen, slash or underscore


def _longest_word(text: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(w) for line in text.splitlines() for w in _BREAK.findall(line)), default=0)


def _wrapped(cell, width: int):
    """`cell` as rich Text with line breaks between words or after a name's hyphens, so that no line is
    wider than `width` (rich alone breaks only at spaces, and folds a long name anywhere)."""
    from rich.cells import cell_len
    from rich.text import Text

    text = cell if isinstance(cell, Text) else Text.from_markup(cell) if isinstance(cell, str) else Text(str(cell))
    if _longest_line(text.plain) <= width:
        return cell
    cuts, start, last = [], 0, None
    for m in re.finditer(r"\s+|[\-/_](?=\S)|\n", text.plain):
        end = m.end()
        if "\n" in m.group():
            start, last = end, None
            continue
        if cell_len(text.plain[start:m.start() if m.group().isspace() else end]) > width and last is not None:
            cuts.append(last)
            start = last
        last = end
    if last is not None and cell_len(text.plain[start:]) > width:
        cuts.append(last)
    lines = text.divide(cuts)
    return Text("\n").join(line.rstrip() or line for line in lines) if cuts else cell


def _longest_line(text: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(line) for line in text.splitlines()), default=0)


def column_needs(column) -> tuple[int, int]:
    """(narrowest width that cuts nothing, natural width) of one column, padding excluded: a header
    wraps between its words only."""
    from rich.cells import cell_len

    cells = [_plain(c) for c in column._cells]
    header = _plain(column.header)
    whole = column.no_wrap
    least = max([max((cell_len(w) for w in header.split()), default=0)]
                + [(_longest_line if whole else _longest_word)(c) for c in cells])
    return least, max([_longest_line(header)] + [_longest_line(c) for c in cells])


def fit_widths(table, width: int) -> list[str]:
    """Set the widths of `table`'s columns so that it fits `width` cells cutting nothing; leave out
    optional columns until it does. Returns the headers left out."""
    dropped: list[str] = []
    optional = list(getattr(table, "optional", ()))
    early = [name for name in getattr(table, "drop_first", ()) if name in optional]
    while True:
        for i, col in enumerate(table.columns):
            col._index = i
        pads = [table._get_padding_width(i) for i in range(len(table.columns))]
        room = width - table._extra_width - sum(pads)
        needs = [column_needs(c) for c in table.columns]
        if sum(full for _, full in needs) <= room:
            return dropped
        if early:  # a column worth less than whole names: left out before any name wraps
            name = early.pop(0)
            optional.remove(name)
        elif sum(least for least, _ in needs) <= room or not optional:
            break
        else:
            name = optional.pop(0)
        kept = [c for c in table.columns if _plain(c.header) != name]
        if len(kept) < len(table.columns):
            dropped.append(name)
        table.columns[:] = kept
    widths = [least for least, _ in needs]
    slack = room - sum(widths)
    # Figures first: a right-justified column (a plan's figures, "14.99 GiB = 14.96 checkpoint + 0.03 loading")
    # takes its natural width before a label wraps less, so a figure is not cut across lines where a label can wrap.
    figures = [k for k, c in enumerate(table.columns) if c.justify == "right"]
    for group in (figures, range(len(needs))):
        while slack > 0:  # one cell at a time to the column furthest from its natural width
            i = max(group, key=lambda k: needs[k][1] - widths[k], default=None)
            if i is None or needs[i][1] <= widths[i]:
                break
            widths[i] += 1
            slack -= 1
    for col, w in zip(table.columns, widths):
        if not col.no_wrap:
            col._cells[:] = [_wrapped(c, w) for c in col._cells]
        col.width, col.no_wrap, col.overflow = w, False, "fold"
    return dropped


@lru_cache(maxsize=None)
def _fitted_class():
    from rich.table import Table

    class FittedTable(Table):
        """A rich Table that fits itself to the width it is rendered at (fit_widths)."""

        optional: tuple[str, ...] = ()
        drop_first: tuple[str, ...] = ()

        def __rich_console__(self, console, options):
            dropped = fit_widths(self, options.max_width)
            if dropped:
                note = (f"({', '.join(dropped)} left out at {options.max_width} columns; a wider terminal or "
                        "the JSON output has them)")
                self.caption = f"{self.caption}\n{note}" if self.caption else note
                self.caption_justify = "left"
            return super().__rich_console__(console, options)

    return FittedTable


def fitted_table(*, optional: tuple[str, ...] = (), drop_first: tuple[str, ...] = (), **kwargs):
    """A rich Table (same keyword arguments) that fits the terminal cutting nothing; the headers in
    `optional` are the columns it may leave out, first named first; those of them also in `drop_first`
    go before any name is wrapped (a bound beside its figure is worth less than whole names)."""
    t = _fitted_class()(**kwargs)
    t.optional, t.drop_first = tuple(optional), tuple(drop_first)
    return t


def print_stacked(console, table, key: int = 0) -> None:
    """Print `table` (a fitted_table, rows added) so that no cell of column `key` (a name, a row's label) is wrapped:
    where the table would not fit with those cells whole, each that does not fit goes on a line of its own above its
    row (a label of words wrapped between them at the width, a name without spaces whole), whose `key` cell is left
    blank, and the other columns keep their whole figures (fit_widths). Every row is printed as a one-row table under
    a header-only one, all at the same widths, so the columns line up."""
    from rich.cells import cell_len
    from rich.text import Text

    width = console.width
    cells = list(table.columns[key]._cells)
    names = [_plain(c) for c in cells]
    for i, col in enumerate(table.columns):
        col._index = i
    extra = table._extra_width + sum(table._get_padding_width(i) for i in range(len(table.columns)))
    needs = [column_needs(c) for c in table.columns]
    if sum(full for _, full in needs) + extra <= width:
        console.print(table)
        return
    others = sum(full for i, (_, full) in enumerate(needs) if i != key)
    room = max(width - extra - others, cell_len(_plain(table.columns[key].header)))
    stacked = [i for i, name in enumerate(names) if _longest_line(name) > room]
    table.columns[key]._cells[:] = ["" if i in stacked else c for i, c in enumerate(cells)]
    fit_widths(table, width)  # the other columns' whole figures first; a text column wraps between its words
    for col, (_, full) in zip(table.columns, [column_needs(c) for c in table.columns]):
        col.width = col.width or full
    rows = list(zip(*(col._cells for col in table.columns)))

    def part(header: bool, row=None):
        t = fitted_table(show_edge=table.show_edge, pad_edge=table.pad_edge, box=table.box, show_header=header,
                         title=table.title if header else None, title_justify="left")
        for col in table.columns:
            t.add_column(col.header, justify=col.justify, width=col.width, no_wrap=col.no_wrap, overflow=col.overflow)
        if row is not None:
            t.add_row(*row)
        return t

    console.print(part(True))
    for i, row in enumerate(rows):
        if i in stacked:
            # a label of words wraps between them at the width; a name without spaces stays whole
            label = "\n".join(textwrap.wrap(names[i], width, break_long_words=False, break_on_hyphens=False))
            console.print(Text(label or names[i]), overflow="ignore", crop=False, soft_wrap=True)
        console.print(part(False, row))
    if table.caption:
        console.print(table.caption)
