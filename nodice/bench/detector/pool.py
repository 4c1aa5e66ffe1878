"""The labeled candidate pool of the detector benchmark: what each candidate is and what the oracle said.

A pool folder holds ``pool/<task>/<name>.py`` (files starting with ``_`` are
helpers the candidates import, not candidates), ``pool/manifest.json`` (the
generator's description of every candidate) and ``labels.json`` (the manifest
plus the oracle's label per device). The benchmark reads ``labels.json`` only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from nodice.errors import NodiceError

Label = Literal["violating", "invariant", "excluded"]
LABELS_FILE = "labels.json"
MANIFEST_FILE = "manifest.json"
FORMAT = 1


class PoolError(NodiceError):
    """The pool folder is missing, or its manifest or labels cannot be read."""

    kind = "bad detector pool"


@dataclass(frozen=True)
class CandidateSpec:
    """What the generator says a candidate is (its label comes from the oracle, not from here)."""

    key: str  # "<task>/<name>", the file's path under pool/ without ".py"
    task: str
    mechanism: str  # the BI mechanism it exercises, or "none" for a harmless pattern
    pattern: str  # how the batch size flows (or, for harmless ones, which harmless use it is)
    intended: Literal["violating", "invariant"]  # the author's expectation, checked against the oracle
    description: str
    # Devices on which the mechanism can show at all: float atomics and warp counts do nothing
    # under Triton's interpreter, which runs programs one after another.
    observable_on: tuple[str, ...] = ("cpu", "cuda")
    # "main", or "heldout" for candidates written after the analyzer was measured on the main pool.
    split: str = "main"

    @property
    def name(self) -> str:
        return self.key.split("/", 1)[1]


@dataclass
class OracleLabel:
    """The oracle's verdict for one candidate on one device, with its evidence."""

    label: Label
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)
    source_sha256: str = ""  # of the candidate file the oracle ran: a later edit makes the label stale


def source_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class PoolEntry:
    spec: CandidateSpec
    family: str
    labels: dict[str, OracleLabel] = field(default_factory=dict)
    source_sha256: str = ""  # of the file as it is now

    def label(self, device: str) -> Label | None:
        """The device's label, or None when there is none or the file changed since it was made."""
        got = self.labels.get(device)
        return got.label if got and not self.stale(device) else None

    def stale(self, device: str) -> bool:
        got = self.labels.get(device)
        return bool(
            got and got.source_sha256 and self.source_sha256 and got.source_sha256 != self.source_sha256
        )


@dataclass
class Pool:
    root: Path
    entries: list[PoolEntry]
    oracle: dict[str, Any] = field(default_factory=dict)  # per device: configuration, date, versions

    def path_of(self, entry: PoolEntry) -> Path:
        return self.root / "pool" / f"{entry.spec.key}.py"

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "oracle": self.oracle,
            "candidates": {
                e.spec.key: {
                    **{k: v for k, v in asdict(e.spec).items() if k != "key"},
                    "family": e.family,
                    "labels": {dev: asdict(lab) for dev, lab in sorted(e.labels.items())},
                }
                for e in self.entries
            },
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=False) + "\n"

    def save(self, path: Path | None = None) -> Path:
        target = path or self.root / LABELS_FILE
        target.write_text(self.to_json())
        return target


def _spec(key: str, d: dict[str, Any]) -> CandidateSpec:
    return CandidateSpec(
        key=key,
        task=d["task"],
        mechanism=d["mechanism"],
        pattern=d["pattern"],
        intended=d["intended"],
        description=d.get("description", ""),
        observable_on=tuple(d.get("observable_on", ("cpu", "cuda"))),
        split=d.get("split", "main"),
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise PoolError(f"no {path.name} in {path.parent}") from None
    except (OSError, ValueError) as exc:  # ValueError: not JSON, or not UTF-8 text
        raise PoolError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict) or "candidates" not in data:
        raise PoolError(f"{path} has no 'candidates'")
    return data


def load_manifest(root: Path) -> list[CandidateSpec]:
    """The candidates a manifest describes: keyed by ``task/name``, or a list whose items carry ``key``."""
    path = root / "pool" / MANIFEST_FILE
    candidates = _read_json(path)["candidates"]
    try:
        if isinstance(candidates, list):
            return [_spec(str(c["key"]), c) for c in candidates]
        return [_spec(k, v) for k, v in candidates.items()]
    except (AttributeError, KeyError, TypeError) as exc:
        raise PoolError(f"{path}: a candidate lacks a field or is not an object ({exc})") from None


def load_pool(root: Path, labels: Path | None = None) -> Pool:
    """The pool under ``root`` with the labels of ``labels`` (default ``root/labels.json``)."""
    if not root.is_dir():
        raise PoolError(f"no pool folder at {root}")
    data = _read_json(labels or root / LABELS_FILE)
    # The manifest describes the candidates (it may have gained fields since the labels were made).
    described = {s.key: s for s in load_manifest(root)} if (root / "pool" / MANIFEST_FILE).exists() else {}
    entries = []
    where = labels or root / LABELS_FILE
    try:
        for key, d in data["candidates"].items():
            labs = {dev: OracleLabel(**lab) for dev, lab in d.get("labels", {}).items()}
            entries.append(PoolEntry(described.get(key) or _spec(key, d), d.get("family", ""), labs))
        pool = Pool(root, entries, dict(data.get("oracle", {})))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        why = f"{where}: a candidate or its labels lack a field or are not objects ({exc})"
        raise PoolError(why) from None
    missing = [e.spec.key for e in entries if not pool.path_of(e).is_file()]
    if missing:
        raise PoolError(f"{len(missing)} labeled candidate(s) have no file, e.g. {missing[0]}")
    for e in entries:
        e.source_sha256 = source_digest(pool.path_of(e))
    return pool


def default_root() -> Path:
    """The repository's pool (``bench/detector``), or the one under the working directory."""
    here = Path(__file__).resolve().parents[3] / "bench" / "detector"
    return here if here.is_dir() else Path("bench/detector")
