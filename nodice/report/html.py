"""The report page: one self-contained HTML file (inline CSS, PNGs as data URIs, no script)."""

from __future__ import annotations

import base64
import datetime
import html
from pathlib import Path

from nodice.evolution.lineage import VersionRecord
from nodice.evolution.scores import (
    LIMIT_NAMES,
    limit_fraction_of,
    limit_text,
    percent_text,
    ratio_text,
    value_text,
)
from nodice.report.data import RunData

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;
color:#1c2833;padding:0 1rem;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}
h2{margin-top:2.2rem;border-bottom:1px solid #d5d8dc;padding-bottom:.2rem}
.sub{color:#5d6d7e}.cards{display:flex;gap:1rem;flex-wrap:wrap;margin:1rem 0}
.card{background:#f4f6f7;border-radius:8px;padding:.7rem 1rem;min-width:140px}
.card b{display:block;font-size:1.3rem}
img{max-width:100%;height:auto;border:1px solid #eaeded;border-radius:6px}
table{border-collapse:collapse;width:100%;font-size:.88rem;margin:.6rem 0}
th,td{border-bottom:1px solid #eaeded;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f8f9f9}td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f8f9f9;padding:.7rem;overflow-x:auto;font-size:.8rem;border-radius:6px}
details{margin:.4rem 0}summary{cursor:pointer;font-weight:600}
.add{color:#1e8449}.del{color:#b03a2e}.hunk{color:#2874a6}
.o-committed{color:#1e8449;font-weight:600}.o-bi_violation{color:#b03a2e;font-weight:600}
.o-incorrect,.o-error{color:#ca6f1e;font-weight:600}.o-cheat{color:#7d3c98;font-weight:600}.o-slower{color:#b7950b}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{data}">'


def _diff_html(diff: str) -> str:
    lines = []
    for line in diff.splitlines():
        cls = ""
        if line.startswith("+") and not line.startswith("+++"):
            cls = "add"
        elif line.startswith("-") and not line.startswith("---"):
            cls = "del"
        elif line.startswith("@@"):
            cls = "hunk"
        lines.append(f'<span class="{cls}">{_e(line)}</span>' if cls else _e(line))
    return "<pre>" + "\n".join(lines) + "</pre>"


def _value(data: RunData, value: float) -> str:
    """``3012 GB/s``; a bare speedup for legacy runs, as their reports always showed it."""
    return f"{value:.4g}" if data.legacy else value_text(value, data.unit)


def _best_line(data: RunData, best: VersionRecord | None) -> str:
    """One sentence: the best version's geomean, its ratio to the fastest baseline, its share of the limit."""
    if best is None:
        return ""
    if data.legacy:
        return (
            f"<p>Best: v{best.version} at a geomean speedup of {best.geomean:.4g} over the reference "
            "(scored by an older nodice).</p>"
        )
    parts = [f"Best: v{best.version} at <b>{_e(_value(data, best.geomean))}</b> geomean"]
    if best.ratio_best is not None:
        parts.append(f"{_e(ratio_text(best.ratio_best))} the fastest baseline")
    fraction = limit_fraction_of(best.scores)
    if fraction is not None:
        parts.append(f"{_e(limit_text(fraction, data.unit))} (measured on the device)")
    return '<p class="best">' + ", ".join(parts) + ".</p>"


def _summary(data: RunData) -> str:
    versions = [v.record for v in data.versions]
    best = versions[-1] if versions else None
    gain = ""
    if best and versions[0].geomean > 0:
        gain = f"{(best.geomean / versions[0].geomean - 1) * 100:+.1f}% over v{versions[0].version}"
    rejected = sum(1 for a in data.attempts if a.rejection and a.rejection != "slower")
    cards = [("best geomean", _value(data, best.geomean) if best else "—", gain)]
    if not data.legacy:
        fraction = limit_fraction_of(best.scores) if best else None
        ratio = best.ratio_best if best else None
        cards.append(
            (
                "against the fastest baseline",
                ratio_text(ratio) if ratio is not None else "—",
                limit_text(fraction, data.unit) if fraction is not None else "",
            )
        )
    cards += [
        ("evaluations", str(len(data.attempts)), f"budget {data.config.budget or '∞'}"),
        ("committed versions", str(len(versions)), f"best v{best.version}" if best else ""),
        ("rejected by the gate", str(rejected), "BI, correctness, cheats, errors"),
        ("supervisor interventions", str(len(data.interventions)), ""),
    ]
    return (
        '<div class="cards">'
        + "".join(
            f'<div class="card">{_e(t)}<b>{_e(v)}</b><span class="sub">{_e(s)}</span></div>'
            for t, v, s in cards
        )
        + "</div>"
        + _best_line(data, best)
    )


def _workload_table(data: RunData) -> str:
    return _legacy_workload_table(data) if data.legacy else _throughput_table(data)


def _throughput_cell(data: RunData, s: dict[str, object]) -> str:
    """Throughput, then its ratio to the fastest baseline, its share of the limit and its time."""
    if not s:
        return "<td class='num'>—</td>"
    if not s.get("correct", True):
        why = _e(str(s.get("detail", ""))[:80])
        return f"<td class='num'>0<br><span class='sub'>incorrect: {why}</span></td>"
    details = []
    ratio, fastest = s.get("ratio_best"), s.get("best_baseline")
    if isinstance(ratio, (int, float)):
        details.append(f"{ratio_text(ratio)} {fastest}" if fastest else ratio_text(ratio))
    fraction = s.get("limit_fraction")
    if isinstance(fraction, (int, float)):
        details.append(f"{percent_text(fraction)} of limit")
    ms = s.get("ms")
    if isinstance(ms, (int, float)) and ms > 0:
        details.append(f"{ms:.3f} ms")
    score = s.get("score", 0.0)
    value = f"{score:.4g}" if isinstance(score, (int, float)) else "—"
    sub = f"<br><span class='sub'>{_e(' · '.join(details))}</span>" if details else ""
    return f"<td class='num'>{value}{sub}</td>"


def _baseline_cell(b: object) -> str:
    value = b.get("throughput") if isinstance(b, dict) else None
    ms = b.get("ms") if isinstance(b, dict) else None
    timing = f"<br><span class='sub'>{ms:.3f} ms</span>" if isinstance(ms, (int, float)) and ms else ""
    shown = f"{value:.4g}" if isinstance(value, (int, float)) else "—"
    return f"<td class='num'>{shown}{timing}</td>"


def _throughput_table(data: RunData) -> str:
    names = data.workloads
    head = "".join(f"<th>{_e(n)}</th>" for n in names)
    rows = []
    for v in data.versions:
        r = v.record
        by = {s["workload"]: s for s in r.scores}
        cells = "".join(_throughput_cell(data, by.get(n, {})) for n in names)
        ratio = ratio_text(r.ratio_best) if r.ratio_best is not None else "—"
        fraction = limit_fraction_of(r.scores)
        limit = percent_text(fraction) if fraction is not None else "—"
        rows.append(
            f"<tr><td>v{r.version}</td><td class='num'>{r.geomean:.4g}</td><td class='num'>{ratio}</td>"
            f"<td class='num'>{limit}</td>{cells}</tr>"
        )
    per_workload = data.workload_baselines()
    for level in data.baseline_levels():
        verdict = f" (BI: {level.bi})" if level.bi else ""
        measured = "".join(_baseline_cell(per_workload.get(n, {}).get(level.name)) for n in names)
        rows.append(
            f"<tr class='sub'><td>baseline: {_e(level.name)}{_e(verdict)}</td>"
            f"<td class='num'>{level.value:.4g}</td><td></td><td></td>{measured}</tr>"
        )
    unit = _e(data.unit or "")
    return (
        f"<table><tr><th>version</th><th>geomean ({unit})</th><th>× fastest baseline</th>"
        f"<th>of limit</th>{head}</tr>{''.join(rows)}</table>"
    )


def _legacy_workload_table(data: RunData) -> str:
    names = data.workloads
    head = "".join(f"<th>{_e(n)}</th>" for n in names)
    rows = []
    for v in data.versions:
        by = {s["workload"]: s for s in v.record.scores}
        cells = []
        for n in names:
            s = by.get(n, {})
            ms = s.get("ms")
            timing = f"<br><span class='sub'>{ms:.3f} ms</span>" if isinstance(ms, (int, float)) else ""
            cells.append(f"<td class='num'>{s.get('score', 0.0):.4g}{timing}</td>")
        rows.append(
            f"<tr><td>v{v.record.version}</td><td class='num'>{v.record.geomean:.4g}</td>"
            f"{''.join(cells)}</tr>"
        )
    baselines = data.legacy_baselines()
    base_rows = "".join(
        f"<tr><td colspan='2'>baseline: {_e(k)}</td><td colspan='{len(names)}'>geomean {val:.4g}</td></tr>"
        for k, val in sorted(baselines.items())
    )
    return f"<table><tr><th>version</th><th>geomean</th>{head}</tr>{''.join(rows)}{base_rows}</table>"


def _versions(data: RunData) -> str:
    parts = []
    for v in reversed(data.versions):
        r = v.record
        stages = ", ".join(f"{k}: {val}" for k, val in r.stages.items())
        scores = ", ".join(f"{s['workload']} {_value(data, s.get('score', 0.0))}" for s in r.scores)
        versus = ""
        if not data.legacy and r.ratio_best is not None:
            versus = f" ({ratio_text(r.ratio_best)} best baseline)"
        body = _diff_html(v.diff) if v.diff.strip() else "<pre>" + _e(v.source) + "</pre>"
        label = "diff against the previous version" if v.diff.strip() else "source"
        parts.append(
            f"<h3>v{r.version} — geomean {_e(_value(data, r.geomean))}{_e(versus)} "
            f"<span class='sub'>({_e(r.sha[:10])}, {_e(_who(r.agent, r.island))})"
            f"</span></h3><p>{_e(r.description)}</p>"
            f"<p class='sub'>gate: {_e(stages)}<br>scores: {_e(scores)}</p>"
            f"<details><summary>{label}</summary>{body}</details>"
        )
    return "".join(parts) or "<p>No version was committed.</p>"


def _who(agent: str, island: int | None) -> str:
    """The agent, and its island when several shared the lineage."""
    return agent if island is None else f"{agent}, island {island}"


def _rejections(data: RunData) -> str:
    rows = []
    for a in data.attempts:
        if not a.rejection:
            continue
        reason = a.reason or (
            f"geomean {_value(data, a.geomean)} below the best {_value(data, a.best_before)}"
            if a.outcome == "slower"
            else ""
        )
        rows.append(
            f"<tr><td>#{a.id}</td><td>{_e(_who(a.agent, a.island))}</td><td>{_e(a.label)}</td>"
            f"<td class='o-{_e(a.outcome)}'>{_e(a.outcome)}</td><td>{_e(reason[:400])}</td></tr>"
        )
    if not rows:
        return "<p>No candidate was rejected.</p>"
    return (
        "<table><tr><th>attempt</th><th>agent</th><th>edit</th><th>outcome</th><th>why</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _interventions(data: RunData) -> str:
    if not data.interventions:
        return "<p>The supervisor did not need to intervene.</p>"
    rows = "".join(
        f"<tr><td>after #{iv.after_attempt}</td><td>{_e(iv.trigger)}</td><td>{_e(iv.review)}</td>"
        f"<td>{_e(', '.join(iv.directions))}</td><td><b>{_e(iv.chosen)}</b> ({_e(iv.source)})</td></tr>"
        for iv in data.interventions
    )
    return (
        "<table><tr><th>when</th><th>trigger</th><th>review</th><th>proposed</th><th>chosen</th></tr>"
        + rows
        + "</table>"
    )


def _score_note(data: RunData) -> str:
    if data.legacy:
        return (
            "Score = speedup over the task's reference on each workload; the headline is their "
            "geometric mean (this run was scored by an older nodice)."
        )
    limit = LIMIT_NAMES.get(data.unit or "", "limit")
    return _e(
        f"Score = the kernel's throughput in {data.unit} on each workload; the headline is their "
        "geometric mean. Under each: the ratio to the fastest baseline measured in the same run, the "
        f"fraction of the device's measured {limit}, and the median time. Baseline rows give each "
        "library's own throughput and its batch-invariance verdict."
    )


def _batch_invariance(data: RunData) -> str:
    """The run's commit rule and how often batch invariance decided an evaluation."""
    n = len(data.attempts)
    rejected = sum(1 for a in data.attempts if a.verdict == "bi_violation")
    if not data.config.bi:
        return (
            "<p>Vanilla run (<code>--no-bi</code>): the gate's BI stages were not run, so versions were "
            "committed on correctness and speed alone and none of them is known to be batch-invariant. "
            "<code>nodice compare BI_RUN THIS_RUN</code> judges the final kernels with the whole gate and "
            "gives the BI pass rate, the speedup a BI-aware run retains and its intervention rate.</p>"
        )
    rate = f"{rejected / n * 100:.1f}%" if n else "—"
    return (
        f"<p>Every committed version passed the whole gate. Intervention rate: {rate} of the "
        f"evaluations ({rejected} of {n}) were rejected for batch invariance.</p>"
    )


def render(data: RunData, images: dict[str, Path]) -> str:
    c = data.config
    stamp = datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>nodice run: {_e(c.task)}</title><link rel="icon" href="data:,"><style>{_CSS}</style></head>
<body>
<h1>nodice evolve {_e(c.task)}{"" if c.bi else " --no-bi"}</h1>
<p class="sub">device {_e(c.device)} · agent {_e(c.agent)}{(" (" + _e(c.model) + ")") if c.model else ""} ·
run {_e(c.run_id)} · written {stamp}</p>
{_summary(data)}
<h2>Batch invariance</h2>
{_batch_invariance(data)}
<h2>Running best against the baselines</h2>
{_img(images["trajectory"], "running-best geomean over evaluations")}
<h2>Per-workload scores</h2>
<p class="sub">{_score_note(data)}</p>
{_workload_table(data)}
{_img(images["workloads"], "per-workload scores of the committed versions")}
<h2>Committed versions</h2>
{_versions(data)}
<h2>Rejected candidates</h2>
{_img(images["rejections"], "rejections by reason")}
{_rejections(data)}
<h2>Supervisor interventions</h2>
{_interventions(data)}
</body></html>
"""
