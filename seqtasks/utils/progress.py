"""Progress bars on standard error for long work, hidden where it is not a terminal (logs, CI, tests)."""

import sys


def progress_bar(length, label):
    """A click progress bar over `length` items; `with progress_bar(n, "Decoding") as bar: bar.update(k)`."""
    import click

    return click.progressbar(length=length, label=label, file=sys.stderr, hidden=not sys.stderr.isatty())
