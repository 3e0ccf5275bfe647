"""`audit`: the parser built from the command modules, and the one place that turns an
error, a Ctrl-C or a closed pipe into one line and an exit code."""
from __future__ import annotations

import argparse
import os
import select
import signal
import sys
import time
from typing import Sequence

from audit.cli import analysis, gating, inventory, replay, scale
from audit.cli.options import EXIT_ERROR, Parser, VersionAction
from audit.errors import AuditError

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process Ctrl-C ended
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a process its closed pipe ended


TRIALS_KEPT = "finished trials are saved, rerun the same command to resume"
TEMPORARY_TRIALS = "its trials ran in a temporary store and are not kept"
# What a Ctrl-C leaves of each command's work, said on its one line.
KEPT_ON_INTERRUPT = {"reproduce": TRIALS_KEPT, "crosscheck": TRIALS_KEPT, "usefulness": TRIALS_KEPT,
                     "rank": TRIALS_KEPT, "wtl": TRIALS_KEPT, "runs-needed": TRIALS_KEPT, "diagnose": TRIALS_KEPT,
                     "compat": TRIALS_KEPT, "run": TRIALS_KEPT, "baseline": TEMPORARY_TRIALS,
                     "gate": TEMPORARY_TRIALS}
FETCH_STOPPED = "the download in progress was stopped and its partial file removed; data sets fetched before it are kept"


def _interrupted_line(args: argparse.Namespace) -> str:
    """The one line a Ctrl-C prints: what it stopped and what is kept."""
    kept = FETCH_STOPPED if args.command == "datasets" and args.fetch else KEPT_ON_INTERRUPT.get(args.command)
    return "audit: interrupted" + (f"; {kept}" if kept else "")


class _Interrupts:
    """Ctrl-C, which a terminal sends to the whole process group; workers ignore it (see
    audit.engine.workers), so this process alone stops. The first raises KeyboardInterrupt, so
    clean-up runs (the pool's workers are ended, no trial is stored in part); a second
    while the command stops leaves at once, with the same one line and no traceback.
    `uv run` forwards the terminal's SIGINT to this process, which so gets each Ctrl-C
    twice within moments: a SIGINT within ``SAME_CTRL_C_SECONDS`` of the first is that
    same Ctrl-C and changes nothing."""

    SAME_CTRL_C_SECONDS = 1.0

    def __init__(self):
        self.line = "audit: interrupted"
        self.signalled: float | None = None  # when the first SIGINT came
        self._told = False

    def first(self, signum, frame):
        self.signalled = time.monotonic()
        signal.signal(signal.SIGINT, self.second)
        raise KeyboardInterrupt

    def second(self, signum, frame):
        if time.monotonic() - self.signalled < self.SAME_CTRL_C_SECONDS:
            return
        self.tell()
        os._exit(EXIT_INTERRUPTED)

    def tell(self) -> None:
        if not self._told:
            self._told = True
            os.write(sys.stderr.fileno(), f"{self.line}\n".encode())  # no buffer a handler could reenter


def _reader_gone(stream) -> bool:
    """Whether ``stream`` is a pipe whose reading end is closed (the kernel reports POLLERR)."""
    try:
        poller = select.poll()
        poller.register(stream.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):  # not a file descriptor, or already closed
        return False


def _cores_here() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity (macOS)
        return os.cpu_count() or 1


def _cap_to_cores(args: argparse.Namespace) -> int:
    """The worker processes to start on this machine: ``--jobs`` (``audit run``: ``--workers``
    unless they run on a Dask scheduler elsewhere), capped, with one warning, at the cores
    here; more would only take turns, each trial slower and the whole no sooner (results
    do not depend on the count)."""
    option = "workers" if args.command == "run" else "jobs"
    asked = getattr(args, option, None) or 1  # None: an option left to the command's own default (one process)
    if getattr(args, "scheduler", None):
        return asked
    cores = _cores_here()
    if asked > cores:
        print(f"audit: warning: --{option} {asked} is more than the {cores} core{'s' * (cores != 1)} this process "
              f"can use; running {cores}", file=sys.stderr)
        setattr(args, option, cores)
        return cores
    return asked


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="audit", description="Replay published active-learning protocols "
                                    "through the real libraries and audit the published numbers.")
    parser.add_argument("--version", action=VersionAction, help="print the versions of al-audit and the AL libraries")
    sub = parser.add_subparsers(dest="command", required=True)
    for commands in (replay, inventory, analysis, gating, scale):
        commands.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    interrupts = _Interrupts()
    previous = signal.signal(signal.SIGINT, interrupts.first)
    try:
        return _main(argv, interrupts)
    finally:
        if interrupts.signalled is None:  # after a Ctrl-C a second one must still leave at once
            signal.signal(signal.SIGINT, previous)


def _main(argv: Sequence[str] | None, interrupts: "_Interrupts") -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "action", None) == "show" and not args.name:
        parser.error("protocols show needs a protocol name")
    interrupts.line = _interrupted_line(args)
    try:
        if _cap_to_cores(args) > 1 and getattr(args, "executor", "local") == "local":
            from audit.engine.workers import start_early

            start_early()  # worker imports overlap with the driver's own
        from audit.engine.workers import pools_kept

        with pools_kept():  # one pool for all of the command's batches of trials
            return args.func(args)
    except AuditError as exc:
        print(f"audit: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        interrupts.tell()
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        if not _reader_gone(sys.stdout):
            raise
        # `audit datasets | head -1`: the reader has all it wanted; what is still buffered
        # goes nowhere, so the flush at exit cannot fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
