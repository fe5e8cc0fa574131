"""The result store: one JSON record per finished case in DIR/cases/, written atomically.

A record is written to a temporary file in the same folder and renamed over its final
name (os.replace is atomic on POSIX and Windows), so a run killed at any moment leaves
either the whole record or none: `--resume` trusts every record it finds. The file name
is the case id with characters outside [A-Za-z0-9._-] replaced, plus a short hash of
the id, so that distinct ids never share a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from solvers.errors import TideError


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file and a rename."""
    with tempfile.NamedTemporaryFile(
        "w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8"
    ) as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(handle.name, path)


class ResultStore:
    """Records of finished cases under `root`/cases."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.folder = self.root / "cases"
        self.folder.mkdir(parents=True, exist_ok=True)

    def path(self, case_id: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in case_id)
        digest = hashlib.sha256(case_id.encode()).hexdigest()[:10]
        return self.folder / f"{safe[:120]}-{digest}.json"

    def write(self, record: dict[str, Any]) -> None:
        write_atomically(self.path(record["id"]), json.dumps(record, indent=1) + "\n")

    def records(self) -> dict[str, dict[str, Any]]:
        """Every stored record by case id (temporary files of an interrupted write are skipped)."""
        found = {}
        for path in sorted(self.folder.glob("*.json")):
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise TideError(f"{path}: unreadable result record ({exc})") from None
            found[record["id"]] = record
        return found

    def discard_partial(self) -> None:
        """Remove the temporary files of writes a killed run left unfinished (a resumed
        run, before any worker writes)."""
        for path in self.folder.glob("*.tmp"):
            path.unlink()

    def clear(self) -> None:
        """Remove every record and leftover temporary file (a fresh, non-resumed run)."""
        for path in [*self.folder.glob("*.json"), *self.folder.glob("*.tmp")]:
            path.unlink()


STUDY_FILE = "study.json"
"""Beside cases/: which study the records belong to (its name and where its file is), so
that `tide render` re-renders the study that was run."""


def remember_study(directory: str | Path, name: str, source: str | None) -> None:
    """Record that the results under `directory` belong to the study `name`, read from the
    file `source` (None: the built-in study)."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    where = None if source is None else str(Path(source).resolve())
    write_atomically(folder / STUDY_FILE, json.dumps({"name": name, "source": where}) + "\n")


def remembered_study(directory: str | Path) -> dict[str, Any] | None:
    """The study the results under `directory` belong to ({"name", "source"}), or None
    when they were stored before studies were recorded."""
    path = Path(directory) / STUDY_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise TideError(f"{path}: unreadable study record ({exc})") from None


def stored_records(directory: str | Path) -> dict[str, dict[str, Any]]:
    """The records stored under `directory` by `tide report --out directory`; a TideError
    naming the folder when it holds none (it is not created)."""
    folder = Path(directory) / "cases"
    records = ResultStore(directory).records() if folder.is_dir() else {}
    if not records:
        raise TideError(
            f"{directory}: no stored results in {folder} (run `tide report --out {directory}`)"
        )
    return records
