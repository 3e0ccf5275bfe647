"""The option types, shared options and the parser class every command uses: each value is
validated at parse time, so bad input is one line and exit 2 before any work."""
from __future__ import annotations

import argparse
import math
import re
from importlib import metadata
from typing import Callable

from audit.version import __version__

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process Ctrl-C ended
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a process its closed pipe ended


class Parser(argparse.ArgumentParser):
    """argparse, with its errors in the one-line form of every other bad input."""

    def error(self, message: str):
        self.exit(EXIT_ERROR, f"audit: error: {message} (see `{self.prog} --help`)\n")


def integer(minimum: int) -> Callable[[str], int]:
    """An option type: an integer of at least ``minimum``, checked when the command line is read."""
    wanted = "a positive integer" if minimum == 1 else f"an integer of at least {minimum}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {wanted}, not {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {wanted}, not {text!r}")
        return value

    return parse


def number(low: float, high: float, what: str) -> Callable[[str], float]:
    """An option type: a finite number in the open interval (low, high); NaN and infinities
    never pass, so no such value reaches a trial or the store."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}") from None
        if not (math.isfinite(value) and low < value < high):
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}")
        return value

    return parse


COUNT = integer(1)  # trials, jobs, workers, batch size, samples
SECONDS = number(0.0, math.inf, "a positive finite number of seconds")
DASK_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
ADDRESS = re.compile(r"(?:(?P<scheme>[a-z]+)://)?(?P<host>[A-Za-z0-9_.\-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})")


def scheduler_address(text: str) -> str:
    """An option type: a Dask scheduler address, [SCHEME://]HOST:PORT, checked before any connection."""
    match = ADDRESS.fullmatch(text)
    if not match or match["scheme"] not in (None, *DASK_SCHEMES) or not 0 < int(match["port"]) < 65536:
        raise argparse.ArgumentTypeError(f"must be a Dask scheduler address [SCHEME://]HOST:PORT such as "
                                         f"tcp://127.0.0.1:8786 (SCHEME one of {', '.join(DASK_SCHEMES)}), "
                                         f"not {text!r}")
    return text


VERSIONED = ("libact", "alipy", "scikit-activeml", "scikit-learn")  # the AL libraries and their models


class VersionAction(argparse.Action):
    """`audit --version`: this tool's version and the installed libraries', read from their
    package metadata (importing them would take seconds)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        def version(name: str) -> str:
            try:
                return metadata.version(name)
            except metadata.PackageNotFoundError:
                return "absent"

        print(f"al-audit {__version__} ({', '.join(f'{n} {version(n)}' for n in VERSIONED)})")
        parser.exit()



def csv_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]



def replay_options(sp: argparse.ArgumentParser, out_help: str) -> None:
    """The options every replaying command shares."""
    sp.add_argument("--trials", type=COUNT, help="number of trials (default: the protocol's)")
    sp.add_argument("--jobs", type=COUNT, default=1, help="parallel worker processes (default 1)")
    sp.add_argument("--data-dir", help="directory of the LIBSVM files")
    sp.add_argument("--store", default=".audit-store.sqlite", help="SQLite results store (default %(default)s)")
    sp.add_argument("--out", help=out_help)
    sp.add_argument("--no-progress", action="store_true", help="no progress bar")


def references_option(sp: argparse.ArgumentParser, help_text: str) -> None:
    """--references FILE.csv: a user's published table in the reference_results/ schema."""
    sp.add_argument("--references", metavar="FILE.csv", help=help_text)


def force_option(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--force", action="store_true", help="replace an earlier al-audit report in the output "
                    "directory even when it held strategies or trials this one lacks")

