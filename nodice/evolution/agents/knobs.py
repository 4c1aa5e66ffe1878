"""The knobs a kernel declares: the pins, table entries and launch options a knob search may set.

A kernel file lists them in one module-level dict literal, read from the source by the AST (a
candidate is never imported to learn its knobs)::

    KNOBS = {
        "ROW_ELEMENTS": (1024, 2048, 4096),   # a module constant: ROW_ELEMENTS = 2048
        "_TILES[128][0]": (64, 128, 256),     # an entry of a module table: _TILES = {128: (128, 2)}
        "num_warps#2": (4, 8),                # the second num_warps= launch option of the host code
        "STREAMING_HINTS": (0, 1),            # a switch
    }

A name is a site as the built-in operator's parameter mutations name it (:mod:`mutations`): the
knob sets that literal in the source text and nothing else, so a setting is a plain edit that goes
through the gate like any other. Values are non-negative integers or bools, tried as categories.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from nodice.errors import NodiceError
from nodice.evolution.agents.mutations import ParamSite, find_sites, replace_literal

KNOBS_NAME = "KNOBS"

Value = int | bool
Setting = dict[str, Value]


class KnobError(NodiceError):
    kind = "bad knobs"


@dataclass(frozen=True)
class Knob:
    """One declared knob: its site in the source and the values it may take."""

    name: str
    choices: tuple[Value, ...]
    site: ParamSite

    @property
    def current(self) -> Value:
        """The value the source holds now (a bool stays a bool when the choices are bools)."""
        if all(isinstance(c, bool) for c in self.choices):
            return bool(self.site.value)
        return self.site.value


def _declaration(tree: ast.Module) -> ast.expr | None:
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == KNOBS_NAME for t in targets):
                return node.value
    return None


def _choices(name: str, raw: object) -> tuple[Value, ...]:
    if not isinstance(raw, (tuple, list)) or not raw:
        raise KnobError(f"{KNOBS_NAME}[{name!r}] must be a non-empty tuple of values")
    for v in raw:
        if not isinstance(v, int) or v < 0:
            raise KnobError(f"{KNOBS_NAME}[{name!r}] holds {v!r}: values are non-negative integers or bools")
    if len(set(raw)) != len(raw):
        raise KnobError(f"{KNOBS_NAME}[{name!r}] repeats a value")
    return tuple(raw)


def read_knobs(source: str) -> list[Knob]:
    """The knobs ``source`` declares, each tied to its site ([] when it declares none).

    A declaration that is not a literal dict of tuples, or that names no single site, is a
    :class:`KnobError` with one line saying which.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise KnobError(f"the kernel does not parse (line {exc.lineno}): {exc.msg}") from None
    node = _declaration(tree)
    if node is None:
        return []
    try:
        declared = ast.literal_eval(node)
    except ValueError:
        raise KnobError(f"{KNOBS_NAME} (line {node.lineno}) must be a literal dict") from None
    if not isinstance(declared, dict) or not all(isinstance(k, str) for k in declared):
        raise KnobError(f"{KNOBS_NAME} (line {node.lineno}) must map names to tuples of values")
    bases = frozenset(k.split("[")[0].split("#")[0] for k in declared)
    sites = {s.name: s for s in find_sites(source, bases)}
    knobs = []
    for name, raw in declared.items():
        site = sites.get(name)
        if site is None:
            raise KnobError(
                f"{KNOBS_NAME} names {name!r}, but the host code has no integer literal of that name "
                "(a module constant, a table entry like _TILES[128][0], or a launch option like num_warps#2)"
            )
        knobs.append(Knob(name, _choices(name, raw), site))
    return knobs


def current_setting(knobs: list[Knob]) -> Setting:
    return {k.name: k.current for k in knobs}


def apply_setting(source: str, knobs: list[Knob], setting: Setting) -> str:
    """``source`` with each knob of ``setting`` set (its literal rewritten in place)."""
    by_name = {k.name: k for k in knobs}
    unknown = sorted(set(setting) - set(by_name))
    if unknown:
        raise KnobError(f"no knob named {', '.join(unknown)}")
    # From the last literal to the first: a rewrite never moves a literal still to come.
    for k in sorted(by_name.values(), key=lambda k: (k.site.line, k.site.col), reverse=True):
        if k.name in setting and setting[k.name] != k.current:
            source = replace_literal(source, k.site, setting[k.name])
    return source


def setting_label(setting: Setting) -> str:
    """The journal label of a setting (``knobs:A=1;B=True``); :func:`parse_label` reads it back."""
    return "knobs:" + ";".join(f"{name}={value!r}" for name, value in setting.items())


def parse_label(label: str) -> Setting | None:
    """The setting a journal label names, or None when the label is not a knob setting's."""
    if not label.startswith("knobs:"):
        return None
    setting: Setting = {}
    for part in label.removeprefix("knobs:").split(";"):
        name, sep, text = part.rpartition("=")
        if not sep:
            return None
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return None
        if not isinstance(value, int):
            return None
        setting[name] = value
    return setting
