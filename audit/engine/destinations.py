"""Where al-audit writes, and the one rule it keeps there: it replaces only what it wrote.

Every report directory carries a manifest (``.al-audit-report.json``: tool version, what
the report holds, the files it wrote). An existing destination is replaced only when
its manifest says al-audit wrote it and it holds nothing else; anything else (a file, a
symbolic link, a directory of the user's, the current directory or one of its parents)
is refused with one line, checked before any trial runs and again just before the
write. Directories are written into a temporary sibling and renamed into place, so a
failed run leaves no half report; they get the user's umask, as `mkdir` would.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from audit.errors import AuditError
from audit.paths import PROJECT_ROOT
from audit.version import __version__

MANIFEST = ".al-audit-report.json"
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")


def check_name(name: Any, what: str) -> str:
    """A protocol's or suite's name becomes part of a path (reports/<protocol>-<dataset>):
    only a short identifier, never a path, may pass."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name) or ".." in name:
        raise AuditError(f"{what} name {name!r} is not a short identifier: use 1-64 of a-z, 0-9, '_', '.', '-', "
                         "starting with a letter or digit, without '..'")
    return name


def read_manifest(directory: Path) -> dict[str, Any] | None:
    """The manifest al-audit left in ``directory``, or None when there is none (not ours)."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("tool") != "al-audit" or not isinstance(manifest.get("files"), list):
        return None
    return manifest


def _protected() -> dict[Path, str]:
    """Directories never to be a report directory: replacing one would remove far more."""
    here = Path.cwd().resolve()
    protected = {Path(os.path.realpath(Path.home())): "your home directory"}
    protected.update({p: "a parent of the al-audit project" for p in PROJECT_ROOT.parents})
    protected[PROJECT_ROOT] = "the al-audit project itself"
    protected.update({p: "a parent of the current directory" for p in here.parents})
    protected[here] = "the current directory"
    return protected


def _probe_writable(directory: Path, shown: Path) -> None:
    """Create and remove an empty directory in ``directory``: the test that holds for root too."""
    probe = directory / f".al-audit-probe-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        raise AuditError(f"cannot write in {shown}: {exc.strerror}") from None


def _own_files(directory: Path) -> set[str]:
    """Every file below ``directory``, relative to it (symbolic links count as files)."""
    found = set()
    for root, dirs, files in os.walk(directory):
        rel = Path(root).relative_to(directory)
        found.update(str(rel / name) if str(rel) != "." else name
                     for name in files + [d for d in dirs if (Path(root) / d).is_symlink()])
    return found


def check_report_dir(path: str | Path, *, create_parents: bool = False) -> dict[str, Any] | None:
    """Refuse, with one line, a report directory al-audit must not write or replace;
    returns the manifest of the al-audit report it would replace (None: nothing to replace).

    ``create_parents``: the missing directories above it are created (the defaults under
    ``reports/``); a path the user gave needs an existing parent directory.
    """
    path = Path(path)
    if path.is_symlink():
        raise AuditError(f"{path} is a symbolic link; give a directory al-audit can write itself (--out)")
    real = Path(os.path.realpath(os.path.abspath(path)))
    what = _protected().get(real) or ("the root directory" if real == Path(real.anchor) else None)
    if what:
        raise AuditError(f"will not write a report into {path}: it is {what}; give a new directory (--out)")
    if real.exists():
        if not real.is_dir():
            raise AuditError(f"{path} is a file, not a report directory; give a new or empty directory (--out)")
        manifest = read_manifest(real)
        present = _own_files(real)
        if present and manifest is None:
            raise AuditError(f"{path} holds files al-audit did not write ({_some(present)}); "
                             "give a new or empty directory (--out)")
        foreign = present - set(manifest["files"] if manifest else ()) - {MANIFEST}
        if foreign:
            raise AuditError(f"{path} is an al-audit report but also holds files it did not write "
                             f"({_some(foreign)}); move them or give another directory (--out)")
        _probe_writable(real.parent, real.parent)
        return manifest
    _check_parent(path, real, create_parents)
    return None


def _check_parent(path: Path, real: Path, create_parents: bool) -> None:
    """A new ``path`` can be made: its parent is a writable directory (or, with
    ``create_parents``, the nearest existing one above it is)."""
    parent = real.parent
    if not parent.is_dir():
        if not create_parents:
            raise AuditError(f"cannot write {path}: {parent} is not an existing directory")
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir():
            raise AuditError(f"cannot write {path}: {parent} is a file")
    _probe_writable(parent, parent)


def _tracked_by_git(path: Path) -> bool:
    try:
        done = subprocess.run(["git", "-C", str(path.parent), "ls-files", "--error-unmatch", "--", path.name],
                              capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False  # no git here: nothing it could track
    return done.returncode == 0


def check_output_file(path: str | Path, written_by_al_audit: Callable[[Path], bool], *, force: bool = False,
                      create_parents: bool = False) -> None:
    """Refuse, with one line, a file al-audit must not write: a symbolic link, a directory,
    a file it did not write; one git tracks (a project's recorded result) needs ``force``."""
    path = Path(path)
    if path.is_symlink():
        raise AuditError(f"{path} is a symbolic link; give a file al-audit can write itself (--out)")
    real = Path(os.path.realpath(os.path.abspath(path)))
    if not real.exists():
        _check_parent(path, real, create_parents)
        return
    if not real.is_file():
        raise AuditError(f"{path} exists and is not a file; give a new file (--out)")
    if not written_by_al_audit(real):
        raise AuditError(f"{path} is a file al-audit did not write; give a new file (--out)")
    if not force and _tracked_by_git(real):
        raise AuditError(f"{path} is tracked by git; give --force to replace it, or a new file (--out)")
    _probe_writable(real.parent, real.parent)


def check_destination(path: str | Path, holds: dict[str, Any], *, force: bool = False,
                      create_parents: bool = False) -> None:
    """Before any work: ``path`` may receive a report that ``holds`` what is given
    (strategies, trials). An earlier al-audit report there with strategies or trials this
    one lacks is not silently replaced: that needs ``force``."""
    manifest = check_report_dir(path, create_parents=create_parents)
    if manifest is None or force:
        return
    before, after = manifest.get("strategies"), holds.get("strategies")
    lost = sorted(set(before) - set(after)) if isinstance(before, list) and after is not None else []
    trials = manifest.get("trials")
    fewer = isinstance(trials, int) and trials > holds.get("trials", trials)
    if lost or fewer:
        had = f"{len(before)} strategies" if isinstance(before, list) else "a report"
        missing = (f"lacks {_some(set(lost))}" if lost else "") + (" and " if lost and fewer else "") + \
                  (f"has {holds['trials']} trials, not {trials}" if fewer else "")
        raise AuditError(f"{path} holds an al-audit report of {had} x {trials} trials; this one {missing}: "
                         "give --out another directory to keep both, or --force to replace it")


def _some(names: set[str]) -> str:
    shown = sorted(names)
    return ", ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")


def csv_table(columns: Sequence[str], rows: Iterable[Sequence[Any] | dict[str, Any]]) -> Callable[[Path], None]:
    """A CSV file for :func:`write_directory`, written by pandas: ``rows`` as sequences in the
    order of ``columns`` or as dicts (keys not in ``columns`` left out). Values are kept as
    objects (an int column with a gap stays ints), a missing value or NaN is an empty field,
    and lines end in CRLF, as the csv module's default dialect writes them."""
    def write(path: Path) -> None:
        import pandas as pd  # only where a table is written: trial workers never pay for it

        materialised = list(rows)
        if materialised and isinstance(materialised[0], dict):
            materialised = [[row.get(c) for c in columns] for row in materialised]
        frame = pd.DataFrame(materialised, columns=list(columns), dtype=object)
        frame.to_csv(path, index=False, lineterminator="\r\n", encoding="utf-8")

    return write


def write_directory(out_dir: str | Path, files: dict[str, str | Callable[[Path], None]],
                    holds: dict[str, Any], *, create_parents: bool = False) -> list[str]:
    """Write ``files`` (relative name: text, or a function writing that path; in order) and
    a manifest saying the report ``holds`` into a temporary sibling, then rename it into
    place; an earlier al-audit report there is replaced, anything else refused. Returns
    the names written (the manifest left out)."""
    out_dir = Path(out_dir)
    replaced = check_report_dir(out_dir, create_parents=create_parents)  # again: it may have changed since
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.parent / f".{out_dir.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
    tmp.mkdir(mode=0o777)  # the umask applies, as to any directory the user makes
    old = None
    try:
        for name, content in files.items():
            target = tmp / name
            target.parent.mkdir(mode=0o777, parents=True, exist_ok=True)
            if isinstance(content, str):
                target.write_text(content)
            else:
                content(target)
        manifest = {"tool": "al-audit", "version": __version__, **holds,
                    "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "files": list(files)}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        if replaced is not None:
            old = out_dir.parent / f".{out_dir.name}.{os.getpid()}-{secrets.token_hex(4)}.old"
            out_dir.rename(old)
        if out_dir.is_dir():  # an empty directory of the user's: filled, never replaced
            for entry in tmp.iterdir():
                entry.rename(out_dir / entry.name)
            tmp.rmdir()
        else:
            tmp.rename(out_dir)
    except BaseException:
        if old is not None and not out_dir.exists():
            old.rename(out_dir)
        shutil.rmtree(tmp, ignore_errors=True)  # al-audit's own: made above under a fresh name
        raise
    if old is not None:
        _remove_report(old, replaced["files"])
    return list(files)


def _remove_report(directory: Path, files: list[str]) -> None:
    """Remove an earlier al-audit report: only the files its manifest lists (and the
    manifest), then its directories if that left them empty. A file put there since it
    was checked stays, and the line says where."""
    inside = os.path.realpath(directory) + os.sep
    for name in (*files, MANIFEST):
        target = directory / name
        if os.path.realpath(target).startswith(inside):  # a manifest names nothing outside its report
            target.unlink(missing_ok=True)
    for root, _, _ in sorted(os.walk(directory), key=lambda entry: -len(entry[0])):
        try:
            os.rmdir(root)
        except OSError:
            pass
    if directory.exists():
        print(f"audit: warning: {directory} keeps files al-audit did not write; the new report is in place",
              file=sys.stderr)
