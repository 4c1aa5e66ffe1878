"""Text helpers for native sources: comments, bracket matching, top-level splitting, called names."""

from __future__ import annotations

import re

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_CALL = re.compile(r"\b([A-Za-z_]\w*(?:\s*<[^<>;()]*>)?)\s*(?:<<<[^>]*>>>)?\s*\(")
_KEYWORDS = frozenset(
    [
        "if",
        "for",
        "while",
        "switch",
        "return",
        "sizeof",
        "static_cast",
        "reinterpret_cast",
        "const_cast",
        "dim3",
        "TORCH_CHECK",
        "AT_ASSERT",
        "C10_CUDA_KERNEL_LAUNCH_CHECK",
        "cudaGetLastError",
        "assert",
        "min",
        "max",
        "std",
        "at",
        "empty",
        "empty_like",
        "zeros",
        "defined",
        "AT_DISPATCH_FLOATING_TYPES",
        "AT_DISPATCH_FLOATING_TYPES_AND_HALF",
        "AT_DISPATCH_FLOATING_TYPES_AND2",
        "data_ptr",
        "size",
        "stride",
        "numel",
        "contiguous",
        "options",
        "device",
        "getCurrentCUDAStream",
        "cudaDeviceGetAttribute",
    ]
)


def strip_comments(text: str) -> str:
    return _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def match_paren(text: str, start: int, open_ch: str = "(", close_ch: str = ")") -> int:
    """Index just past the bracket that closes the one at ``start``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def split_top(s: str, opens: str = "([{<", closes: str = ")]}>") -> list[str]:
    """Split at the commas outside brackets (arguments of a call, parameters of a signature)."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in s:
        if ch in opens:
            depth += 1
        elif ch in closes:
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur))
    return out


def called_names(block: str) -> set[str]:
    names = set()
    for m in _CALL.finditer(block):
        name = re.sub(r"\s+", "", m.group(1))
        base = re.sub(r"<.*", "", name)
        if base not in _KEYWORDS and not base.startswith(("cuda", "TORCH", "AT_", "C10")):
            names.add(name + ("<<<" if "<<<" in block[m.start() : m.end()] else ""))
    return names
