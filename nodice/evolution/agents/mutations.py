"""Launch and tiling parameter mutations found in any kernel's host code.

The host code (everything outside ``@triton.jit`` functions) holds the numbers
that shape a launch: ``num_warps=4``, ``BLOCK_H=…``, the cap in
``min(triton.next_power_of_2(hidden), 1024)``, module constants such as
``ROWS_PER_PROGRAM = 4`` or ``BLOCK_M = gl.constexpr(128)``, and the entries of
module tables such as ``_TILES = {128: (128, 2), 64: (128, 3)}``. Each is found
by the AST and changed in place in the source text, so the rest of the file
keeps its formatting.

When the benchmark recorded which host lines each workload ran
(``lines_run``, nodice.gate.host_lines), :func:`live_sites` keeps only the
parameters those lines can reach: a literal on a line that ran, or a module
constant or table that such a line (or device code) reads. A fallback path the
device never takes is left alone.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass

from nodice.gate.static.triton_kernels import is_jit

# Names whose integer value is a launch or tiling choice.
_TUNABLE = re.compile(r"(BLOCK|ROWS|TILE|SPLIT|WARPS|STAGES|GROUP|CHUNK|PER_PROGRAM)", re.IGNORECASE)
_LIMITS = {"num_warps": (1, 16), "num_stages": (1, 6)}
_DEFAULT_LIMITS = (1, 16384)


@dataclass(frozen=True)
class ParamSite:
    """One integer literal in the host code that sets a launch or tiling parameter."""

    name: str
    value: int
    line: int
    col: int
    end_col: int
    kind: str  # "kwarg" | "cap" | "constant" | "local" | "table"
    # The module name a "constant" or "table" site is read through (its liveness is the name's).
    module_name: str = ""


@dataclass(frozen=True)
class ParamMutation:
    site: ParamSite
    new_value: int
    source: str

    @property
    def key(self) -> str:
        return f"param:{self.site.name}={self.new_value}"

    @property
    def description(self) -> str:
        what = {
            "kwarg": "launch parameter",
            "cap": "tile cap",
            "constant": "constant",
            "local": "host choice",
            "table": "table entry",
        }[self.site.kind]
        return f"{what} {self.site.name}: {self.site.value} -> {self.new_value}"


def _jit_function_lines(tree: ast.Module) -> set[int]:
    """Line numbers inside functions decorated with a Triton JIT (device code is left alone)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and is_jit(node):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def _int_literal(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value > 0:
        return node.value
    return None


def _switch_literal(node: ast.AST) -> int | None:
    """A declared knob's literal may also be 0 or a bool (``STREAMING_HINTS = 0``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and node.value >= 0:
        return int(node.value)
    return None


def _unwrap_constexpr(node: ast.expr) -> ast.expr:
    """``gl.constexpr(128)`` / ``tl.constexpr(128)`` → the literal inside."""
    if (
        isinstance(node, ast.Call)
        and len(node.args) == 1
        and not node.keywords
        and ast.unparse(node.func).split(".")[-1] == "constexpr"
    ):
        return node.args[0]
    return node


def find_sites(source: str, declared: frozenset[str] = frozenset()) -> list[ParamSite]:
    """Every launch or tiling literal of the host code.

    ``declared``: module names a kernel declares as knobs (its ``KNOBS``, :mod:`knobs`): found
    whatever they are called, and their literal may also be 0 or a bool (a switch).
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    device_lines = _jit_function_lines(tree)
    sites: list[ParamSite] = []

    def add(name: str, node: ast.expr, kind: str, module_name: str = "") -> None:
        # A literal, or each literal arm of a conditional (`8 if head_dim >= 64 else 4`).
        if isinstance(node, ast.IfExp):
            add(name, node.body, kind, module_name)
            add(name, node.orelse, kind, module_name)
            return
        node = _unwrap_constexpr(node)
        value = _int_literal(node)
        if value is None and (module_name or name) in declared:
            value = _switch_literal(node)
        if value is None or node.lineno in device_lines or node.lineno != node.end_lineno:
            return
        sites.append(
            ParamSite(name, value, node.lineno, node.col_offset, node.end_col_offset or 0, kind, module_name)
        )

    def add_table(name: str, table: ast.Dict) -> None:
        # `_TILES = {128: (128, 2), ...}`: each integer of each entry, named by its key and place.
        for key, value in zip(table.keys, table.values, strict=True):
            if key is None:
                continue
            label = ast.unparse(key)
            if isinstance(value, ast.Tuple):
                for i, element in enumerate(value.elts):
                    add(f"{name}[{label}][{i}]", element, "table", name)
            else:
                add(f"{name}[{label}]", value, "table", name)

    def tunable(name: str) -> bool:
        return name in _LIMITS or bool(_TUNABLE.search(name)) or name in declared

    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg and tunable(node.arg):
            add(node.arg, node.value, "kwarg")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "min":
            if any("next_power_of_2" in ast.unparse(a) for a in node.args):
                target = _assigned_name(tree, node) or "tile"
                for a in node.args:
                    add(f"cap({target})", a, "cap")
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            t, value = node.targets[0], node.value
            kind = "constant" if node.col_offset == 0 else "local"
            if isinstance(t, ast.Name) and isinstance(value, ast.Dict) and kind == "constant":
                if tunable(t.id):
                    add_table(t.id, value)
            elif isinstance(t, ast.Name) and tunable(t.id) and (kind == "local" or t.id.isupper()):
                add(t.id, value, kind, t.id if kind == "constant" else "")
            elif isinstance(t, ast.Tuple) and isinstance(value, ast.Tuple) and len(t.elts) == len(value.elts):
                for name, element in zip(t.elts, value.elts, strict=True):  # block_m, block_n = 128, 64
                    if isinstance(name, ast.Name) and tunable(name.id):
                        add(name.id, element, kind)
    return _number_repeats(sorted(sites, key=lambda s: (s.line, s.col)))


def _number_repeats(sites: list[ParamSite]) -> list[ParamSite]:
    """Give the 2nd, 3rd … site of a name its own key (``num_warps#2``), stable across edits elsewhere."""
    seen: dict[str, int] = {}
    out = []
    for s in sites:
        seen[s.name] = seen.get(s.name, 0) + 1
        n = seen[s.name]
        out.append(s if n == 1 else dataclasses.replace(s, name=f"{s.name}#{n}"))
    return out


def _assigned_name(tree: ast.Module, call: ast.Call) -> str | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and node.value is call and isinstance(node.targets[0], ast.Name):
            return node.targets[0].id
    return None


def neighbours(site: ParamSite) -> list[int]:
    base = site.name.split("#")[0]
    lo, hi = _LIMITS.get(base, _DEFAULT_LIMITS)
    # Small table entries are counts (pipeline stages, warps per group): one step either way.
    if base == "num_stages" or (site.kind == "table" and site.value <= 8):
        candidates = [site.value - 1, site.value + 1]
    else:
        candidates = [site.value * 2, site.value // 2]
    return [v for v in candidates if lo <= v <= hi and v != site.value]


def replace_literal(source: str, site: ParamSite, value: int | str) -> str:
    """``source`` with the site's literal replaced by ``value`` (a number or an expression's text)."""
    lines = source.splitlines(keepends=True)
    line = lines[site.line - 1]
    # ast offsets are in UTF-8 bytes; host lines with literals are ASCII in practice, but be exact.
    raw = line.encode()
    raw = raw[: site.col] + str(value).encode() + raw[site.end_col :]
    lines[site.line - 1] = raw.decode()
    return "".join(lines)


def _names_read(tree: ast.Module) -> dict[str, set[int]]:
    """Each name the module reads, with the lines it is read on.

    A membership test (``head_dim in _TILES``) reads a table's keys, not the values a site holds:
    it does not count.
    """
    keys_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, ast.Name):
                    keys_only.add(id(right))
    out: dict[str, set[int]] = {}

    def visit(node: ast.AST, local: frozenset[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            params = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
            params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
            local = local | params  # a parameter of that name hides the module's
        if (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and id(node) not in keys_only
            and node.id not in local
        ):
            out.setdefault(node.id, set()).add(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child, local)

    visit(tree, frozenset())
    return out


def live_sites(source: str, sites: list[ParamSite], lines_run: set[int] | None) -> list[ParamSite]:
    """The sites the recorded host lines can reach (all of them when nothing was recorded).

    A literal on a host line counts if that line ran. A module constant or table counts if a line
    that ran reads it, or if the device code of a kernel those lines launch does (a JIT function's
    constants are read at compile time, not run as Python; kernels and the JIT helpers they call
    count when a reached line, or a counted kernel's body, names them).
    """
    if not lines_run:
        return sites
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return sites
    reads = _names_read(tree)
    device = _jit_function_lines(tree)
    live = _reached_lines(tree, reads, device, lines_run)
    launched = _launched_device_lines(tree, reads, live)
    out = []
    for s in sites:
        if s.module_name:
            where = reads.get(s.module_name, set())
            if where & live or where & launched:
                out.append(s)
        elif s.line in live:
            out.append(s)
    return out


def _launched_device_lines(tree: ast.Module, reads: dict[str, set[int]], live: set[int]) -> set[int]:
    """The bodies of the JIT functions reached lines launch, and of the JIT helpers those call."""
    kernels = [
        (node.name, set(range(node.lineno, (node.end_lineno or node.lineno) + 1)))
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and is_jit(node)
    ]
    return _named_closure(kernels, reads, live, skip=lambda body: False) - live


def _reached_lines(
    tree: ast.Module, reads: dict[str, set[int]], device: set[int], lines_run: set[int]
) -> set[int]:
    """The lines that ran, plus the bodies of host functions a reached line names but whose body did
    not run: a helper behind a cache (``functools.cache``, a dict of plans) runs on the first call of
    a process only, and the call the benchmark traced may have been a later one."""
    bodies = [
        (node.name, set(range(node.body[0].lineno, (node.end_lineno or node.lineno) + 1)))
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno not in device
    ]
    # A body that ran in part keeps only the lines that ran: its other branches stay out.
    return _named_closure(bodies, reads, set(lines_run), skip=lambda body: bool(body & lines_run))


def _named_closure(
    bodies: list[tuple[str, set[int]]],
    reads: dict[str, set[int]],
    start: set[int],
    skip: Callable[[set[int]], bool],
) -> set[int]:
    """``start`` grown by the body of every function (not ``skip``-ped) whose name a line in it
    reads, until nothing more is added."""
    reached = set(start)
    grown = True
    while grown:
        grown = False
        for name, body in bodies:
            if not skip(body) and not body <= reached and reads.get(name, set()) & reached:
                reached |= body
                grown = True
    return reached


def lines_run_of(scores: list[dict[str, object]] | None) -> set[int] | None:
    """The host lines every workload of a score vector ran, or None unless each one recorded them."""
    if not scores:
        return None
    lines: set[int] = set()
    for s in scores:
        ran = s.get("lines_run")
        if not isinstance(ran, list):
            return None
        lines.update(int(x) for x in ran)
    return lines or None


def param_mutations(source: str, lines_run: set[int] | None = None) -> list[ParamMutation]:
    """Every single-parameter step (double, halve; ±1 for pipeline stages) of the host code.

    ``lines_run``: the host lines the benchmark ran; only the parameters they reach are stepped.
    """
    out: list[ParamMutation] = []
    for site in live_sites(source, find_sites(source), lines_run):
        for value in neighbours(site):
            out.append(ParamMutation(site, value, replace_literal(source, site, value)))
    return out
