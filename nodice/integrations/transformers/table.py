"""Markdown of a ``nodice bench e2e`` report: invariance per backend and schedule, the tax, one forward."""

from __future__ import annotations

from typing import Any


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _num(v: Any, digits: int = 1) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def invariance_table(report: dict[str, Any]) -> list[str]:
    lines = [
        "| backend | schedule | requests | tokens | token mismatches | logits mismatches "
        "| requests differing |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for label, section in (("", report.get("invariance", {})), (" (sampled)", report.get("sampled", {}))):
        for backend, entry in section.items():
            for name, c in entry["schedules"].items():
                lines.append(
                    f"| {_cell(backend)}{label} | {name} | {c['requests']} | {c['tokens']} "
                    f"| {c['token_mismatches']} | {c['logit_mismatches']} | {c['requests_mismatched']} |"
                )
    return lines


def tax_table(report: dict[str, Any]) -> list[str]:
    backends = report.get("backends", [])
    head = " | ".join(f"{_cell(b)} tokens/s | {_cell(b)} ms/step" for b in backends)
    lines = [
        f"| mix | concurrency | {head} | nodice / fastest stock |",
        "|---|---:|" + "---:|" * (2 * len(backends) + 1),
    ]
    for mix, by_c in report.get("tax", {}).items():
        for c, row in by_c.items():
            cells = " | ".join(
                _num(row.get(b, {}).get("tokens_per_s"))
                + ("*" if row.get(b, {}).get("complete") is False else "")
                + " | "
                + _num(row.get(b, {}).get("decode_step_ms"), 2)
                for b in backends
            )
            stock = [row[b]["tokens_per_s"] for b in backends if not b.startswith("nodice") and b in row]
            ours = row.get("nodice", {}).get("tokens_per_s")
            ratio = _num(ours / max(stock), 3) if ours and stock and max(stock) else "–"
            lines.append(f"| {mix} | {c} | {cells} | {ratio} |")
    tax = report.get("tax", {})
    if any(
        v.get("complete") is False for by_c in tax.values() for row in by_c.values() for v in row.values()
    ):
        lines += ["", "\\* stopped by `--tax-timeout`: the requests finished by then, over the time taken."]
    return lines


def _profile_rows(label: str, prof: dict[str, Any], kinds: list[str]) -> str:
    cells = " | ".join(_num(prof["kinds_ms"].get(k), 2) for k in kinds)
    idle = prof["wall_ms"] - prof["kernel_ms"]
    return (
        f"| {label} | {_num(prof['wall_ms'], 2)} | {_num(prof['kernel_ms'], 2)} | {prof['kernels']} | "
        f"{cells} | {_num(idle, 2)} |"
    )


def profile_table(report: dict[str, Any]) -> list[str]:
    """torch.profiler: wall time against device-kernel time, by kind of kernel (ms)."""
    prof = report["profile"]
    rows = [
        *((f"{b}, {step}", p) for b, steps in prof.get("forward", {}).items() for step, p in steps.items()),
        *((f"{b}, generate_batch", g["run"]) for b, g in prof.get("generate", {}).items()),
    ]
    if not rows:
        return []
    kinds = sorted({k for _, p in rows for k in p["kinds_ms"]})
    p = report["preset"]
    gen = next(iter(prof.get("generate", {}).values()), None)
    what = (
        f"a decode step at batch {p['forward_batch']} and a prefill of "
        f"{p['forward_batch']}×{p['forward_seq']} tokens (non-paged)"
    )
    if gen is not None:
        what += (
            f"; a short generate_batch run ({gen['mix']}, concurrency {gen['concurrency']}, "
            f"{gen['tokens']} tokens)"
        )
    lines = [
        "## Where the time goes (torch.profiler; ms of device kernels by kind)",
        "",
        f"{what}. *wall − kernels* is time no kernel ran (host work, launches, syncs).",
        "",
        "| " + " | ".join(["run", "wall", "kernels", "launches", *kinds, "wall − kernels"]) + " |",
        "|---|" + "---:|" * (4 + len(kinds)),
        *(_profile_rows(_cell(label), pr, kinds) for label, pr in rows),
        "",
        "Top kernels:",
        "",
        "| run | kernel | kind | calls | ms |",
        "|---|---|---|---:|---:|",
    ]
    for label, pr in rows:
        for k in pr["top"][:6]:
            lines.append(
                f"| {_cell(label)} | `{_cell(k['name'][:70])}` | {k['kind']} | {k['calls']} | {k['ms']:.2f} |"
            )
    return lines


def markdown(report: dict[str, Any]) -> str:
    p = report["preset"]
    shape = p["shape"]
    v = report["versions"]
    out = [
        "# nodice bench e2e",
        "",
        f"- device: {report['device']} ({report['device_name']}); nodice {v['nodice']}, torch {v['torch']}, "
        f"triton {v['triton']}, transformers {v['transformers']}",
        f"- model: {shape['family']} config, {shape['layers']} layers, hidden {shape['hidden']}, "
        f"{shape['heads']} heads / {shape['kv_heads']} kv heads, head dim {shape['head_dim']}, "
        f"intermediate {shape['intermediate']}, vocab {shape['vocab']}"
        + (
            f", {shape['experts']} experts ({shape['top_k']} per token, width {shape['moe_intermediate']})"
            if shape.get("experts")
            else ""
        )
        + f"; random weights, {p['dtype']}",
        f"- command: `{report.get('command') or '-'}`",
        "",
        "## Invariance: every request against itself alone, bit for bit",
        "",
        *invariance_table(report),
    ]
    if report.get("tax"):
        out += [
            "",
            "## The tax: generated tokens per second, median time between two tokens",
            "",
            *tax_table(report),
        ]
    if report.get("forward"):
        out += [
            "",
            f"## One forward pass (batch {p['forward_batch']}, {p['forward_seq']} tokens), median ms",
            "",
        ]
        out += ["| backend | prefill | decode step |", "|---|---:|---:|"]
        for b, t in report["forward"].items():
            out.append(f"| {_cell(b)} | {_num(t.get('prefill_ms'), 2)} | {_num(t.get('decode_ms'), 2)} |")
    if report.get("profile"):
        out += ["", *profile_table(report)]
    if report.get("stats"):
        out += ["", "## nodice's paths in this run (calls routed / fallen back)", ""]
        out += [
            f"- {k}: {s['routed']} / {s['fallbacks']}"
            + (f" ({s['last_fallback']})" if s["last_fallback"] else "")
            for k, s in report["stats"].items()
        ]
    return "\n".join(out) + "\n"
