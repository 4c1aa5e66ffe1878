"""The run directory: a git repository holding the kernel, plus the run's configuration and state.

Layout::

    RUN/
      workspace/kernel.py   the kernel the agent edits (tracked by git; each version is a commit)
      run.json              what was asked: task, device, agent, budgets (written atomically)
      state.json            a cache of the run's progress for people and tools (written atomically)
      results.sqlite        the result store: every evaluation, every supervisor intervention
      scratch/              snapshots under evaluation (removed after each one), and
                            scratch/inflight/: one file per evaluation started and not yet recorded
      islands/K/            island K's own workspace, when several agents share the lineage

Git and the result store are the truth; ``state.json`` is rebuilt from them on
every start, so a run killed at any instant resumes without losing a
completed evaluation or a commit.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import shutil
import tempfile
import types
import typing
import uuid
from collections.abc import Iterator
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from nodice.errors import NodiceError

WORKSPACE = "workspace"
KERNEL_FILE = "kernel.py"
GITIGNORE = """\
run.json
state.json
results.sqlite*
scratch/
islands/
report.html
*.png
.lock
.write.lock
__pycache__/
PROMPT.md
logs/
"""


class RunDirError(NodiceError):
    kind = "bad run directory"


class RunBusyError(NodiceError):
    kind = "run busy"


@dataclass
class RunConfig:
    """What the user asked for; stored in ``run.json`` and updated by options given on resume."""

    task: str
    device: str
    agent: str = "builtin"
    model: str | None = None
    budget: int | None = None
    time_budget_s: float | None = None
    knowledge_dirs: list[str] = field(default_factory=list)
    base_url: str | None = None
    entry: str = "kernel"
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    stagnation_window: int = 6
    rng_seed: int = 0
    # The unit the run's scores are in (TFLOP/s or GB/s); None in run.json files written before units.
    unit: str | None = None
    # False for the vanilla baseline (`--no-bi`): the gate's BI stages are not run and commits
    # need correctness and speed only. Fixed for the life of a run.
    bi: bool = True
    # The workloads the run is scored on (names; empty: all of the task's for the device). Fixed
    # for the life of a run, like the commit rule: scores over other workloads would not compare.
    workloads: list[str] = field(default_factory=list)
    # Extra flags for a coding-agent CLI preset (`--agent-arg`), and the limit of one agent launch.
    agent_args: list[str] = field(default_factory=list)
    launch_timeout_s: float | None = None

    @classmethod
    def from_dict(cls, d: Any) -> RunConfig:
        """The config in ``d`` (run.json's object); unknown keys are ignored, a wrong type is a
        ``TypeError`` naming the key."""
        if not isinstance(d, dict):
            raise TypeError(f"it holds {type(d).__name__}, not an object")
        hints = typing.get_type_hints(cls)
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        for key, value in known.items():
            if not _has_type(value, hints[key]):
                raise TypeError(f"{key} is {json.dumps(value)[:60]}, not {_type_text(hints[key])}")
        required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
        missing = [name for name in required if name not in known]
        if missing:
            raise TypeError(f"it has no {', '.join(missing)}")
        return cls(**known)


def _has_type(value: Any, hint: Any) -> bool:
    """Whether a JSON value fits a RunConfig field's type (str, int, float, bool, list[str], X | None)."""
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    for option in options:
        if option is type(None) and value is None:
            return True
        if option is bool and isinstance(value, bool):
            return True
        if option is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if option is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return math.isfinite(value)
        if option is str and isinstance(value, str):
            return True
        if typing.get_origin(option) is list and isinstance(value, list):
            return all(isinstance(x, str) for x in value)
    return False


def _type_text(hint: Any) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false", type(None): "null"}
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    return " or ".join(names.get(o, "a list of strings") for o in options)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over ``path``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunDir:
    """Paths and file-level operations of one run directory.

    With ``island`` K, the workspace is island K's own folder (``islands/K``): several agents then
    edit side by side while every commit still lands in the one ``workspace/`` tracked by git.
    """

    def __init__(self, root: str | Path, island: int | None = None):
        self.root = Path(root).resolve()
        self.island = island

    # ---- paths -------------------------------------------------------------
    @property
    def home(self) -> RunDir:
        """The run itself: its ``workspace/`` is the one git tracks."""
        return self if self.island is None else RunDir(self.root)

    @property
    def workspace(self) -> Path:
        if self.island is not None:
            return self.root / "islands" / str(self.island)
        return self.root / WORKSPACE

    @property
    def kernel(self) -> Path:
        return self.workspace / KERNEL_FILE

    @property
    def config_path(self) -> Path:
        return self.root / "run.json"

    @property
    def state_path(self) -> Path:
        return self.root / "state.json"

    @property
    def store_path(self) -> Path:
        return self.root / "results.sqlite"

    @property
    def scratch(self) -> Path:
        return self.root / "scratch"

    @property
    def report_path(self) -> Path:
        return self.root / "report.html"

    def exists(self) -> bool:
        """A run lives here; ``run.json`` is written last at creation, so the seed is there too."""
        return self.config_path.is_file()

    # ---- config and state ----------------------------------------------------
    def create(self, config: RunConfig, seed_source: str) -> None:
        """Lay out a fresh run directory with the seed kernel in the workspace."""
        if self.root.exists() and not self.root.is_dir():
            raise RunDirError(f"{self.root} is a file, not a folder")
        if self.root.exists() and any(self.root.iterdir()) and not self.exists():
            raise RunDirError(f"{self.root} exists, is not empty and is not a nodice run")
        try:
            self.workspace.mkdir(parents=True, exist_ok=True)
            (self.root / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
            self.kernel.write_text(seed_source, encoding="utf-8")
        except OSError as exc:
            raise RunDirError(f"cannot create the run folder {self.root}: {exc.strerror or exc}") from None
        self.save_config(config)

    def load_config(self) -> RunConfig:
        try:
            return RunConfig.from_dict(json.loads(self.config_path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise RunDirError(f"{self.root} is not a nodice run (no run.json)") from None
        except (json.JSONDecodeError, UnicodeDecodeError, TypeError) as exc:
            raise RunDirError(f"{self.config_path} is damaged: {exc}") from None
        except OSError as exc:
            raise RunDirError(f"cannot read {self.config_path}: {exc.strerror or exc}") from None

    def save_config(self, config: RunConfig) -> None:
        write_json_atomic(self.config_path, asdict(config))

    def save_state(self, state: dict[str, Any]) -> None:
        write_json_atomic(self.state_path, state)

    def load_state(self) -> dict[str, Any]:
        # A cache rebuilt from git and the store: one that cannot be read as an object is no cache.
        try:
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    # ---- workspace snapshots ---------------------------------------------------
    def workspace_files(self) -> dict[str, str]:
        """The workspace's Python sources (and native sources beside them), by relative path."""
        files: dict[str, str] = {}
        if not self.workspace.is_dir():
            return files
        for p in sorted(self.workspace.rglob("*")):
            if not p.is_file() or "__pycache__" in p.parts or p.suffix not in (".py", ".cu", ".cuh", ".h"):
                continue
            try:
                files[p.relative_to(self.workspace).as_posix()] = p.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
        return files

    def write_workspace(self, files: dict[str, str]) -> None:
        """Make the workspace hold exactly ``files`` (other sources are removed)."""
        for rel in set(self.workspace_files()) - set(files):
            (self.workspace / rel).unlink(missing_ok=True)
        for rel, text in files.items():
            target = self.workspace / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")

    def snapshot(self, files: dict[str, str]) -> Path:
        """A private copy of ``files`` to evaluate, so later edits cannot change what is judged. It lies
        outside the run: a candidate's ``__file__`` does not lead to the run's journal or lineage."""
        folder = Path(tempfile.mkdtemp(prefix="nodice-eval-"))
        for rel, text in files.items():
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        return folder

    def clear_scratch(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)

    # ---- evaluations in flight, across processes --------------------------------------
    @property
    def inflight(self) -> Path:
        return self.scratch / "inflight"

    def reserve_evaluation(self) -> Path:
        """Mark one evaluation as started by this process; call while holding :meth:`writing`."""
        self.inflight.mkdir(parents=True, exist_ok=True)
        token = self.inflight / f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        token.touch()
        return token

    def release_evaluation(self, token: Path) -> None:
        """Its evaluation is recorded (or lost); call while holding :meth:`writing`."""
        token.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # others still in flight
            self.inflight.rmdir()

    def evaluations_in_flight(self) -> int:
        """Evaluations started by live processes and not yet recorded (a killed one's are forgotten)."""
        if not self.inflight.is_dir():
            return 0
        live = 0
        for token in self.inflight.iterdir():
            pid = token.name.partition("-")[0]
            if pid.isdigit() and _alive(int(pid)):
                live += 1
            else:
                token.unlink(missing_ok=True)
        return live

    def resolve_in_workspace(self, rel: str) -> Path:
        """``rel`` inside the workspace, refusing absolute paths and escapes through ``..`` or links."""
        if not rel or Path(rel).is_absolute():
            raise RunDirError(f"'{rel}': give a path relative to the workspace")
        target = (self.workspace / rel).resolve()
        if target != self.workspace.resolve() and self.workspace.resolve() not in target.parents:
            raise RunDirError(f"'{rel}' is outside the workspace")
        return target

    # ---- locks -------------------------------------------------------------------
    @contextlib.contextmanager
    def engine_lock(self) -> Iterator[None]:
        """Held by ``nodice evolve`` for its lifetime; the kernel drops it when the process dies."""
        with self._flock(self.root / ".lock", blocking=False):
            yield

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Serialises writes to git and the store between the engine and ``nodice run`` commands."""
        with self._flock(self.root / ".write.lock", blocking=True):
            yield

    @contextlib.contextmanager
    def _flock(self, path: Path, *, blocking: bool) -> Iterator[None]:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                raise RunBusyError(f"another nodice evolve is running on {self.root}") from None
            yield
        finally:
            os.close(fd)
