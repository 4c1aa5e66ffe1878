"""Targeted patterns in C/C++/CUDA sources (files next to the candidate, or strings embedded in Python).

Native code is not parsed; a light statement-level taint over identifiers finds
split counts derived from the batch, the grid or the SM count, float
``atomicAdd`` accumulation, reductions strided by the grid, block sizes chosen
from the batch, and host code that picks a kernel from the batch size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodice.gate.static.contracts import Contract
from nodice.gate.static.native_text import called_names, match_paren, split_top, strip_comments
from nodice.gate.static.report import Collector

_ASSIGN = re.compile(
    r"(?:^|[;{}()\n])\s*(?:[\w:<>,\s\*&]*?\s)?\**(\w+)\s*(?:\[[^\]]*\])?\s*(?<![=!<>+\-*/])=(?!=)\s*([^;{}]+);"
)
_ATTR_SM = re.compile(r"cudaDeviceGetAttribute\s*\(\s*&\s*(\w+)\s*,\s*cudaDevAttrMultiProcessorCount")
_SM = re.compile(r"multiProcessorCount|multi_processor_count|\bnum_sms\b|\bsm_count\b|\bnumSMs\b|\bNUM_SMS\b")
_GRID = re.compile(r"\bgridDim\s*\.\s*[xyz]\b")
_BATCH_READ = re.compile(
    r"\b(?!w\w*\b|weight\w*\b|bias\w*\b)(\w+)\s*\.\s*(?:size\s*\(\s*0\s*\)|sizes\s*\(\s*\)\s*\[\s*0\s*\]|numel\s*\(\s*\))"
)
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
_LAUNCH = re.compile(r"(\w+(?:\s*<[^<>;()]*>)?)\s*<<<\s*([^>]*?)>>>\s*\(")
_GLOBAL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(\w+)\s*\(([^)]*)\)")
_FLOAT_NAMES = (
    "float", "double", "half", "__half", "__half2", "__nv_bfloat16", "nv_bfloat16", "at::Half",
    "at::BFloat16", "c10::Half", "c10::BFloat16", "scalar_t", "float2", "float4", "acc_t", "accscalar_t",
)  # fmt: skip
_INT_NAMES = (
    "int", "unsigned", r"unsigned\s+int", "long", r"long\s+long", r"unsigned\s+long\s+long", "int32_t",
    "int64_t", "uint32_t", "uint64_t", "size_t", r"unsigned\s+short",
)  # fmt: skip
_FLOAT_TYPES = "(?:" + "|".join(_FLOAT_NAMES) + ")"
_INT_TYPES = "(?:" + "|".join(_INT_NAMES) + ")"
# What makes a kernel more than elementwise besides the reduction idioms: shared memory, atomics,
# block-wide synchronisation, an accumulating assignment.
_NOT_ELEMENTWISE = re.compile(r"__shared__|\batomic\w*\s*\(|__syncthreads|\+=|-=|\*=|/=")
# CUDA's approximate intrinsics and directed roundings: a kernel using them computes other bits
# than one using the IEEE functions.
_APPROXIMATE = re.compile(
    r"\b__(?:exp|exp10|log|log2|log10|sin|cos|tan|pow|fdivide|saturate)f\b|\b__f(?:add|sub|mul|div|sqrt|rcp|fma)_r[zdu]\b"
)
# A loop header (``for (; i < n; i += stride)``): its increment is not an accumulation.
_FOR_HEADER = re.compile(r"\bfor\s*\([^)]*\)")
_REDUCTION_IDIOM = re.compile(r"__shfl\w*|BlockReduce|WarpReduce|blockDim\.x\s*/\s*2|>>=\s*1|/=\s*2")


@dataclass
class NativeSource:
    display: str  # file name shown in findings
    text: str
    first_line: int = 1  # line of the display file where ``text`` starts


class _NativeAnalysis:
    def __init__(self, src: NativeSource, contract: Contract, collector: Collector):
        self.src = src
        self.contract = contract
        self.collector = collector
        self.text = strip_comments(src.text)
        self.lines = src.text.splitlines()
        # identifier -> (kinds, trace); kinds ⊆ {batch, grid, sm}
        self.taint: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {}

    def line_of(self, pos: int) -> int:
        return self.src.first_line + self.text.count("\n", 0, pos)

    def step(self, pos: int, note: str = "") -> str:
        i = self.text.count("\n", 0, pos)
        text = self.lines[i].strip() if i < len(self.lines) else ""
        return f"{self.src.display} line {self.src.first_line + i}: {text}" + (f"  ({note})" if note else "")

    def expr_taint(self, expr: str, pos: int) -> tuple[frozenset[str], tuple[str, ...]] | None:
        """Kinds of batch-context sources an expression depends on, with the trace of the strongest."""
        traces: dict[str, tuple[str, ...]] = {}
        if _GRID.search(expr):
            traces.setdefault("grid", (self.step(pos, "grid size"),))
        m = _BATCH_READ.search(expr)
        if m:
            traces.setdefault("batch", (self.step(pos, f"batch source: {m.group(0).strip()}"),))
        if _SM.search(expr):
            traces.setdefault("sm", (self.step(pos, "SM count"),))
        kinds: set[str] = set()
        for ident in _IDENT.findall(expr):
            if ident in self.taint:
                k, t = self.taint[ident]
                kinds |= k
                for kind in k:
                    traces.setdefault(kind, t)
            elif self.contract.is_batch_symbol(ident):
                traces.setdefault("batch", (self.step(pos, f"batch symbol '{ident}' (contract)"),))
        kinds |= traces.keys()
        for kind in ("batch", "grid", "sm"):  # the path shown starts at the batch when there is one
            if kind in traces:
                return frozenset(kinds), traces[kind]
        return None

    def propagate(self) -> None:
        for m in _ATTR_SM.finditer(self.text):
            self.taint[m.group(1)] = (frozenset({"sm"}), (self.step(m.start(), "SM count"),))
        for _ in range(3):
            changed = False
            for m in _ASSIGN.finditer(self.text):
                name, rhs = m.group(1), m.group(2)
                t = self.expr_taint(rhs, m.start(2))
                if t is None or (name in self.taint and self.taint[name][0] >= t[0]):
                    continue
                self.taint[name] = (
                    t[0],
                    (*t[1], self.step(m.start(2))) if self.step(m.start(2)) not in t[1] else t[1],
                )
                changed = True
                self.protected_assignment(name, t, m.start(2))
            if not changed:
                break

    def protected_assignment(self, name: str, t: tuple[frozenset[str], tuple[str, ...]], pos: int) -> None:
        p = self.contract.protected_for(name)
        if p is None:
            return
        kinds, trace = t
        line = self.line_of(pos)
        if p.mechanism == "work_partitioning" and not kinds & {"batch", "grid"}:
            self.collector.add(
                "native_split_from_sm_count",
                self.src.display,
                line,
                p.name,
                f"{name} is derived from the SM count",
                list(trace),
            )
            return
        rule_id = (
            "native_split_count"
            if p.mechanism == "work_partitioning"
            else ("rng_seed_from_batch" if p.mechanism == "rng" else "protected_param_from_batch")
        )
        source = "the grid size" if "grid" in kinds and "batch" not in kinds else "the batch size"
        self.collector.add(
            rule_id,
            self.src.display,
            line,
            p.name,
            f"{name} is derived from {source}",
            list(trace),
            mechanism=p.mechanism,
            guidance=p.guidance or None,
        )

    def atomics(self) -> None:
        for m in re.finditer(r"\batomicAdd\s*\(", self.text):
            end = match_paren(self.text, m.end() - 1)
            args = split_top(self.text[m.end() : end - 1])
            if len(args) < 2:
                continue
            kind = self._pointee_type(args[0]) or self._value_type(args[1])
            line = self.line_of(m.start())
            if kind == "int":
                continue
            rule_id = "native_float_atomic" if kind == "float" else "atomic_add_unknown_dtype"
            self.collector.add(
                rule_id,
                self.src.display,
                line,
                "atomicAdd",
                "atomicAdd accumulates a floating-point sum in arrival order",
                [self.step(m.start(), "float atomicAdd")],
            )

    def _declared(self, name: str) -> str | None:
        if re.search(
            _FLOAT_TYPES
            + r"\s*(?:const\s*)?\*?\s*(?:const\s*)?(?:__restrict__\s*)?\b"
            + re.escape(name)
            + r"\b",
            self.text,
        ):
            return "float"
        if re.search(
            r"\b"
            + _INT_TYPES
            + r"\s*(?:const\s*)?\*?\s*(?:const\s*)?(?:__restrict__\s*)?\b"
            + re.escape(name)
            + r"\b",
            self.text,
        ):
            return "int"
        return None

    def _pointee_type(self, arg: str) -> str | None:
        cast = re.search(r"\(\s*(\w[\w:\s]*?)\s*\*\s*\)", arg)
        if cast:
            return (
                "float"
                if re.fullmatch(_FLOAT_TYPES, cast.group(1).strip())
                else "int"
                if re.fullmatch(_INT_TYPES, cast.group(1).strip())
                else None
            )
        ident = _IDENT.search(arg.replace("&", " "))
        return self._declared(ident.group(0)) if ident else None

    def _value_type(self, arg: str) -> str | None:
        a = arg.strip()
        if re.fullmatch(r"[-+]?\d+\.\d*f?|[-+]?\d*\.\d+f?|[-+]?\d+f", a):
            return "float"
        if re.fullmatch(r"[-+]?\d+[uUlL]*", a):
            return "int"
        ident = _IDENT.match(a)
        return self._declared(ident.group(0)) if ident and ident.group(0) == a else None

    def grid_strided_reductions(self) -> None:
        for m in re.finditer(r"\bfor\s*\(", self.text):
            hdr_end = match_paren(self.text, m.end() - 1)
            header = self.text[m.end() : hdr_end - 1]
            t = self.expr_taint(header, m.start())
            if t is None or "grid" not in t[0]:
                continue
            body = self._block_after(hdr_end)
            declared = set(
                re.findall(r"\b(?:" + _FLOAT_TYPES + "|" + _INT_TYPES + r"|auto|bool)\s+(\w+)", body)
            )
            accs = [a for a in re.findall(r"\b(\w+)\s*(?:\[[^\]]*\])?\s*\+=", body) if a not in declared]
            if accs:
                self.collector.add(
                    "native_grid_partitioned_reduction",
                    self.src.display,
                    self.line_of(m.start()),
                    "NUM_SPLITS",
                    f"a loop strided by the grid size accumulates into {accs[0]}",
                    [*t[1], self.step(m.start(), "reduction strided by the grid")],
                )

    def _block_after(self, pos: int) -> str:
        rest = self.text[pos:]
        stripped = rest.lstrip()
        if stripped.startswith("{"):
            start = pos + (len(rest) - len(stripped))
            return self.text[start : match_paren(self.text, start, "{", "}")]
        end = self.text.find(";", pos)
        return self.text[pos : end + 1 if end >= 0 else len(self.text)]

    def launches(self) -> None:
        kernels = {
            m.group(1): [p.strip().split()[-1].strip("*&") for p in m.group(2).split(",") if p.strip()]
            for m in _GLOBAL.finditer(self.text)
        }
        reduces = bool(_REDUCTION_IDIOM.search(self.text))
        for m in _LAUNCH.finditer(self.text):
            cfg = split_top(m.group(2))
            if len(cfg) >= 2 and reduces:
                t = self.expr_taint(cfg[1], m.start())
                if t is not None and "batch" in t[0]:
                    self.collector.add(
                        "native_block_size_from_batch",
                        self.src.display,
                        self.line_of(m.start()),
                        "blockDim",
                        "the block size of a reducing kernel depends on the batch",
                        [*t[1], self.step(m.start(), "block size of the launch")],
                    )
            name = re.sub(r"\s*<.*", "", m.group(1))
            params = kernels.get(name, [])
            end = match_paren(self.text, m.end() - 1)
            for pname, arg in zip(params, split_top(self.text[m.end() : end - 1]), strict=False):
                p = self.contract.protected_for(pname)
                t = self.expr_taint(arg, m.start())
                if p is not None and t is not None and t[0] & {"batch", "grid"}:
                    self.collector.add(
                        "native_split_count",
                        self.src.display,
                        self.line_of(m.start()),
                        p.name,
                        f"{arg.strip()} is passed as {pname} to {name} and depends on the batch",
                        [*t[1], self.step(m.start(), f"passed as {pname} to {name}")],
                        mechanism=p.mechanism,
                        guidance=p.guidance or None,
                    )

    def device_spans(self) -> list[tuple[int, int]]:
        """Bodies of ``__global__``/``__device__`` functions: their ``if``s are guards, not host dispatch."""
        spans = []
        for m in re.finditer(r"__(?:global|device)__[^{;]*\{", self.text):
            start = m.end() - 1
            spans.append((start, match_paren(self.text, start, "{", "}")))
        return spans

    def elementwise_kernels(self) -> dict[str, frozenset[str]]:
        """``__global__`` kernels that compute each output element from its own inputs (no
        reduction idiom, no shared memory, no atomics, no accumulating assignment), each with the
        approximate intrinsics it calls."""
        out = {}
        for m in _GLOBAL.finditer(self.text):
            start = self.text.find("{", m.end())
            if start < 0:
                continue
            body = _FOR_HEADER.sub("for ()", self.text[start : match_paren(self.text, start, "{", "}")])
            if not (_REDUCTION_IDIOM.search(body) or _NOT_ELEMENTWISE.search(body)):
                out[m.group(1)] = frozenset(_APPROXIMATE.findall(body))
        return out

    def dispatch(self) -> None:
        device = self.device_spans()
        elementwise = self.elementwise_kernels()
        # Elementwise kernels the host launches anywhere: a batch-dependent choice among them gives an
        # element another formula when their approximate intrinsics differ (the vector body and the
        # tail of one operation may sit under two separate conditions).
        launched_anywhere = {re.sub(r"\s*<.*", "", m.group(1)) for m in _LAUNCH.finditer(self.text)}
        same_math = len({elementwise[k] for k in launched_anywhere if k in elementwise}) <= 1
        for m in re.finditer(r"\bif\s*\(", self.text):
            if any(a <= m.start() < b for a, b in device):
                continue
            cond_end = match_paren(self.text, m.end() - 1)
            cond = self.text[m.end() : cond_end - 1]
            t = self.expr_taint(cond, m.start())
            if t is None or "batch" not in t[0] or re.search(r"==\s*0\b|<=\s*0\b|<\s*1\b", cond):
                continue
            body = self._block_after(cond_end)
            after = self.text.find(body, cond_end) + len(body)
            rest = self.text[after:].lstrip()
            other = ""
            if rest.startswith("else"):
                other = self._block_after(self.text.find("else", after) + 4)
            elif re.search(r"\breturn\b", body):
                other = self.text[after : after + 2000]
            a, b = called_names(body), called_names(other)
            if a != b and (any("<<<" in x for x in a | b) or (a | b)):
                launched = {re.sub(r"\s*<.*", "", x) for x in a | b if "<<<" in x}
                if (
                    launched
                    and launched <= elementwise.keys()
                    and same_math
                    and all("<<<" in x for x in a ^ b)
                ):
                    # Which elementwise kernel computes an element, or whether a launch that has no
                    # elements to compute runs: the kernels' formulas decide, and running both
                    # sides across the batch sizes shows whether they differ.
                    self.collector.add(
                        "native_elementwise_dispatch",
                        self.src.display,
                        self.line_of(m.start()),
                        "ALGORITHM",
                        "host code chooses between elementwise kernels from the batch size",
                        [*t[1], self.step(m.start(), "batch-dependent dispatch")],
                    )
                    continue
                self.collector.add(
                    "native_batch_dispatch",
                    self.src.display,
                    self.line_of(m.start()),
                    "ALGORITHM",
                    "host code chooses the kernel from the batch size",
                    [*t[1], self.step(m.start(), "batch-dependent dispatch")],
                )


def analyze_native(src: NativeSource, contract: Contract, collector: Collector) -> None:
    a = _NativeAnalysis(src, contract, collector)
    a.propagate()
    a.atomics()
    a.grid_strided_reductions()
    a.launches()
    a.dispatch()


def looks_native(text: str) -> bool:
    return any(
        tok in text for tok in ("__global__", "#include", "<<<", "atomicAdd", 'extern "C"', "__device__")
    )
