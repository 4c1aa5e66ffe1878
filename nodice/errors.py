"""Failure kinds of nodice, one exception type each.

The CLI turns every one of them into a single line and exit code 2 (the input
could not be judged); rejections of a judged candidate are verdicts, not errors.
"""

from __future__ import annotations


class NodiceError(Exception):
    """Base class: the input could not be judged."""

    kind = "error"

    def line(self) -> str:
        return f"{self.kind}: {self}"


class UsageError(NodiceError):
    """Options that do not go together; the line is the message alone."""

    kind = "usage"

    def line(self) -> str:
        return str(self)


class UnknownTaskError(NodiceError):
    kind = "unknown task"


class CandidateLoadError(NodiceError):
    """The candidate file is missing, unreadable, does not parse or fails to import."""

    kind = "cannot load candidate"


class EntryPointError(NodiceError):
    """No callable entry point, or one whose arity does not match the task."""

    kind = "bad entry point"


class KernelCrashError(NodiceError):
    """The candidate raised, or its process died, while running."""

    kind = "kernel crashed"


class KernelTimeoutError(NodiceError):
    kind = "kernel timed out"


class OutputSpecError(NodiceError):
    """The kernel returned the wrong type, shape or dtype."""

    kind = "bad output"


class DeviceError(NodiceError):
    kind = "device unavailable"


class ReferenceFileError(NodiceError):
    """A reference file cannot serve as a task: missing names, no batch axis, a failing Model."""

    kind = "bad reference"


class NotApplicableError(NodiceError):
    """The operator itself couples samples: its reference gives a sample no output of its own (a
    reduction or normalisation across the batch, a batch-mean loss, training-mode BatchNorm, a random
    draw). No candidate can be batch-invariant for it, so none is judged (verdict ``not_applicable``)."""

    kind = "not batch-applicable"


class DefinitionError(NodiceError):
    """A FlashInfer-Bench Definition nodice cannot judge: unreadable, invalid, or mapped to no task."""

    kind = "bad definition"


class SolutionError(DefinitionError):
    """A FlashInfer-Bench Solution nodice cannot run: unreadable, invalid, for another definition, CUDA."""

    kind = "bad solution"


class ContractError(NodiceError):
    kind = "bad contract"


class BaselineUnavailable(NodiceError):
    """A library baseline cannot run here: its package or backend is missing (the reason says which)."""

    kind = "baseline unavailable"


class StoreError(NodiceError):
    """A result store or run journal that cannot be opened or read (not SQLite, not writable)."""

    kind = "bad store"


class _Interrupts:
    """Whose a KeyboardInterrupt is in this process (one object, so no module attribute changes)."""

    raised_by_code = False


_INTERRUPTS = _Interrupts()


def mark_sandboxed() -> None:
    """This process is a sandboxed worker, in its own session: no terminal's Ctrl-C reaches it, so a
    KeyboardInterrupt here was raised by code (the candidate's), a crash like any other."""
    _INTERRUPTS.raised_by_code = True


def interrupts_are_raised() -> bool:
    """Whether a KeyboardInterrupt is code's (a sandboxed worker) rather than the user's Ctrl-C (a
    kernel run in the command's own process, ``--no-sandbox``), which must stop the command."""
    return _INTERRUPTS.raised_by_code
