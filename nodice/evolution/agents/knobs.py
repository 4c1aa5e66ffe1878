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

A second dict, ``ORDER_KNOBS``, in the same form, lists the knobs that change the order of a sum
(a split size, a key tile, a chunk length): their settings give other bits by design, so the
search judges them by the whole gate alone (reference correctness, batch invariance) and not bit
for bit against the best version. A name may not be in both.

A third, ``KNOB_WHEN``, says which knobs matter only while others hold given values (a split's
segment length only with the split on, a pointer-load path's tiles only with that path on)::

    KNOB_WHEN = {
        "SPLIT_SEG_K": {"SPLIT_K": (1,)},          # read only while SPLIT_K is 1
        "CHAINED_SPLITS": {"SPLIT_K": (0,)},       # never reached while SPLIT_K is 1
        "CHAINED_SEG_K": {"CHAINED_SPLITS": (1,)}, # conditions chain: active while its parent is
    }

A knob is active when every condition holds and every knob it names is active itself. An inactive
knob keeps the best version's value: settings that differ only there are one setting, never two
evaluations, and the search never proposes a combination the kernel cannot reach.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from nodice.errors import NodiceError
from nodice.evolution.agents.mutations import ParamSite, find_sites, replace_literal

KNOBS_NAME = "KNOBS"
ORDER_KNOBS_NAME = "ORDER_KNOBS"
WHEN_NAME = "KNOB_WHEN"

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
    # Declared in ORDER_KNOBS: its settings reorder a sum, so they are not checked bit for bit.
    reorders: bool = False
    # From KNOB_WHEN: (knob, values) pairs that must all hold for this knob to matter.
    when: tuple[tuple[str, tuple[Value, ...]], ...] = ()

    @property
    def current(self) -> Value:
        """The value the source holds now (a bool stays a bool when the choices are bools)."""
        if all(isinstance(c, bool) for c in self.choices):
            return bool(self.site.value)
        return self.site.value


def _declaration(tree: ast.Module, name: str) -> ast.expr | None:
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return node.value
    return None


def _declared(tree: ast.Module, name: str) -> dict[str, Any]:
    """The literal dict ``name`` holds ({} when the module does not assign it)."""
    node = _declaration(tree, name)
    if node is None:
        return {}
    try:
        declared = ast.literal_eval(node)
    except ValueError:
        raise KnobError(f"{name} (line {node.lineno}) must be a literal dict") from None
    if not isinstance(declared, dict) or not all(isinstance(k, str) for k in declared):
        raise KnobError(f"{name} (line {node.lineno}) must map names to tuples of values")
    return declared


def _choices(dict_name: str, name: str, raw: object) -> tuple[Value, ...]:
    if not isinstance(raw, (tuple, list)) or not raw:
        raise KnobError(f"{dict_name}[{name!r}] must be a non-empty tuple of values")
    for v in raw:
        if not isinstance(v, int) or v < 0:
            raise KnobError(f"{dict_name}[{name!r}] holds {v!r}: values are non-negative integers or bools")
    if len(set(raw)) != len(raw):
        raise KnobError(f"{dict_name}[{name!r}] repeats a value")
    return tuple(raw)


def read_knobs(source: str) -> list[Knob]:
    """The knobs ``source`` declares (``KNOBS``, then ``ORDER_KNOBS``), each tied to its site ([]
    when it declares none).

    A declaration that is not a literal dict of tuples, that names no single site, or that names a
    knob in both dicts is a :class:`KnobError` with one line saying which.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise KnobError(f"the kernel does not parse (line {exc.lineno}): {exc.msg}") from None
    plain, ordered = _declared(tree, KNOBS_NAME), _declared(tree, ORDER_KNOBS_NAME)
    both = sorted(set(plain) & set(ordered))
    if both:
        raise KnobError(
            f"{both[0]!r} is in both {KNOBS_NAME} and {ORDER_KNOBS_NAME}: "
            "a knob either keeps the bits or reorders a sum"
        )
    bases = frozenset(k.split("[")[0].split("#")[0] for k in (*plain, *ordered))
    sites = {s.name: s for s in find_sites(source, bases)}
    knobs = []
    for dict_name, declared in ((KNOBS_NAME, plain), (ORDER_KNOBS_NAME, ordered)):
        for name, raw in declared.items():
            site = sites.get(name)
            if site is None:
                raise KnobError(
                    f"{dict_name} names {name!r}, but the host code has no integer literal of that name "
                    "(a module constant, a table entry like _TILES[128][0], "
                    "or a launch option like num_warps#2)"
                )
            knobs.append(
                Knob(name, _choices(dict_name, name, raw), site, reorders=dict_name == ORDER_KNOBS_NAME)
            )
    return _conditioned(knobs, _declared(tree, WHEN_NAME))


def _conditioned(knobs: list[Knob], declared: dict[str, Any]) -> list[Knob]:
    """``knobs`` with the conditions of ``KNOB_WHEN``, in an order where a knob follows the knobs
    its conditions name."""
    by_name = {k.name: k for k in knobs}
    for name, conditions in declared.items():
        if name not in by_name:
            raise KnobError(f"{WHEN_NAME} names {name!r}, which is not a declared knob")
        if not isinstance(conditions, dict) or not conditions:
            raise KnobError(f"{WHEN_NAME}[{name!r}] must map knob names to the values it is read under")
        when = []
        for parent, values in conditions.items():
            if parent not in by_name or parent == name:
                raise KnobError(
                    f"{WHEN_NAME}[{name!r}] depends on {parent!r}, which is not another declared knob"
                )
            values = values if isinstance(values, (tuple, list)) else (values,)
            outside = [v for v in values if v not in by_name[parent].choices]
            if not values or outside:
                raise KnobError(
                    f"{WHEN_NAME}[{name!r}] asks {parent!r} for {values!r}, "
                    f"outside its choices {by_name[parent].choices!r}"
                )
            when.append((parent, tuple(values)))
        by_name[name] = replace(by_name[name], when=tuple(when))
    ordered: list[Knob] = []
    placed: set[str] = set()
    placing: set[str] = set()

    def place(k: Knob) -> None:
        if k.name in placed:
            return
        if k.name in placing:
            raise KnobError(f"{WHEN_NAME} goes round in a circle through {k.name!r}")
        placing.add(k.name)
        for parent, _ in k.when:
            place(by_name[parent])
        placing.discard(k.name)
        placed.add(k.name)
        ordered.append(k)

    for k in knobs:
        place(by_name[k.name])
    return ordered


def active(knobs: list[Knob], setting: Setting) -> set[str]:
    """The knobs that matter under ``setting`` (every knob without conditions, and each whose
    conditions hold on active knobs). ``knobs`` in :func:`read_knobs`'s order."""
    on: set[str] = set()
    for k in knobs:
        if all(p in on and setting[p] in values for p, values in k.when):
            on.add(k.name)
    return on


def canonical(knobs: list[Knob], setting: Setting) -> Setting:
    """``setting`` with every inactive knob at the source's value: the one setting it stands for."""
    on = active(knobs, setting)
    return {k.name: setting[k.name] if k.name in on else k.current for k in knobs}


def restrict(knobs: list[Knob], names: Iterable[str]) -> list[Knob]:
    """The knobs with every one not in ``names`` held at the source's value (one choice): a search of
    those knobs alone, the others as the best version has them. An unknown name is an error."""
    wanted = list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in {k.name for k in knobs}]
    if unknown:
        raise KnobError(f"no knob named {', '.join(unknown)} (declared: {', '.join(k.name for k in knobs)})")
    return [k if k.name in wanted else replace(k, choices=(k.current,)) for k in knobs]


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
