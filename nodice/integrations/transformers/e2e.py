"""``nodice bench e2e``: batch invariance and its cost, end to end in transformers' continuous batching.

For nodice (``enable``) and each stock paged backend (``paged|sdpa``, ``paged|flash_attention_2``
where installed), every request runs alone, then all of them run together under each schedule;
a request's generated tokens and the fingerprint of its logits at every draw are compared with
its run alone, bit for bit. The stock backends are the negative control: their mismatches are
counted, never assumed. The tax: generated tokens per second and the time between two tokens of
a request at several concurrency levels, per mix (on a GPU against ``paged|sdpa+cuda-graphs`` too:
the same backend with transformers' CUDA graphs forced on, which its heuristic leaves off where
a mask is needed; and, asked for by name, against ``nodice-eager``: nodice without the CUDA graphs
of its decode steps); and one forward pass timed alone (a prefill of B·S tokens, a decode step at
batch B) so that kernel time and the framework's overhead are told apart. The report is JSON
(written again after every phase) and Markdown.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from nodice.bench.output import write_report
from nodice.integrations.transformers.batches import LEDGER
from nodice.integrations.transformers.enable import (
    Integration,
    _install_sampler,
    continuous_batching_config,
    enable,
)
from nodice.integrations.transformers.sampler import LogitsRecord
from nodice.integrations.transformers.workload import (
    Preset,
    Request,
    Schedule,
    arrival,
    build_model,
    requests,
)

# A stock backend with this suffix runs with transformers' CUDA graphs forced on (``use_cuda_graph``).
GRAPHS = "+cuda-graphs"
STOCK = ("paged|sdpa", "paged|sdpa" + GRAPHS, "paged|flash_attention_2")
# nodice with no CUDA graph (each decode step launched from Python): asked for by name, for the tax
# and the profile, to show what the graphs of its decode steps are worth.
EAGER = "nodice-eager"


def is_nodice(backend: str) -> bool:
    return backend in ("nodice", EAGER)


def graph_setting(backend: str) -> bool | None:
    """``cuda_graphs`` for a backend's runs: None is the default (nodice: decode steps as graphs where
    CUDA is; a stock backend: transformers' heuristic), True forces graphs on, False keeps them off."""
    if backend == EAGER:
        return False
    return True if backend.endswith(GRAPHS) else None


def attn_implementation(backend: str) -> str:
    """The ``attn_implementation`` a backend name sets (its CUDA-graph suffix aside)."""
    return backend.removesuffix(GRAPHS)


@dataclass(frozen=True)
class Outcome:
    """One request's result in one run: its tokens and its logits' fingerprints per draw."""

    tokens: tuple[int, ...]
    logits: tuple[int, ...]
    error: str = ""


@dataclass(frozen=True)
class Comparison:
    """One schedule against the requests alone, for one backend."""

    requests: int
    tokens: int
    draws: int
    requests_mismatched: int
    token_mismatches: int
    logit_mismatches: int
    errors: int


def available_backends(device: str) -> list[str]:
    backends = ["nodice", "paged|sdpa"]
    if device.startswith("cuda"):
        backends.append("paged|sdpa" + GRAPHS)
        try:
            import flash_attn  # noqa: F401

            backends.append("paged|flash_attention_2")
        except ImportError:
            pass
    return backends


def _config(
    preset: Preset, schedule: Schedule, *, record: bool, nodice: bool, cuda_graphs: bool | None = None
) -> Any:
    over: dict[str, Any] = {
        "block_size": preset.block_size,
        "num_blocks": preset.num_blocks,
        "max_batch_tokens": schedule.max_batch_tokens,
        "max_requests_per_batch": schedule.max_requests_per_batch,
    }
    if nodice or record:
        # nodice: decode steps as CUDA graphs where CUDA is (unless False); a recorded stock run stays eager.
        return continuous_batching_config(
            scheduler_type=schedule.scheduler, cuda_graphs=cuda_graphs if nodice else False, **over
        )
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    if cuda_graphs:
        over["use_cuda_graph"] = True
    return ContinuousBatchingConfig(
        scheduler_type=schedule.scheduler.replace("nodice-", "").replace("nodice", "fifo"), **over
    )


def generate(
    model: Any,
    reqs: list[Request],
    preset: Preset,
    schedule: Schedule,
    *,
    record: LogitsRecord | None,
    nodice: bool,
    do_sample: bool = False,
    timestamps: bool = False,
    timeout_s: float = 3600.0,
    cuda_graphs: bool | None = None,
    settings: dict[str, Any] | None = None,
) -> tuple[dict[str, Outcome], dict[str, list[float]]]:
    """Run ``reqs`` (in this arrival order) through ``generate_batch``'s manager; outcomes by request id.

    ``settings`` receives what transformers resolved: ``cuda_graphs``, (varlen, decode) paths."""
    from transformers import GenerationConfig

    gc = GenerationConfig(
        do_sample=do_sample,
        temperature=0.8 if do_sample else None,
        top_p=0.95 if do_sample else None,
        max_new_tokens=max(r.max_new_tokens for r in reqs),
        eos_token_id=-1,
        pad_token_id=0,
    )
    if record is not None:
        record.fingerprints.clear()
    cb = _config(preset, schedule, record=record is not None, nodice=nodice, cuda_graphs=cuda_graphs)
    results: dict[str, Any] = {}
    deadline = time.monotonic() + timeout_s
    with model.continuous_batching_context_manager(
        generation_config=gc, continuous_batching_config=cb, block=True, timeout=60, warmup=False
    ) as manager:
        if settings is not None:
            used = manager.continuous_batching_config.use_cuda_graph
            settings["cuda_graphs"] = list(used) if isinstance(used, tuple | list) else [bool(used)] * 2
        for r in reqs:
            manager.add_request(
                list(r.prompt),
                request_id=r.request_id,
                max_new_tokens=r.max_new_tokens,
                record_timestamps=timestamps,
            )
        while len(results) < len(reqs) and time.monotonic() < deadline:
            res = manager.get_result(timeout=1)
            if res is not None and res.is_finished():
                results[res.request_id] = res
            elif res is None and not manager.is_running():
                break
    outcomes = {}
    stamps = {}
    for r in reqs:
        res = results.get(r.request_id)
        if res is None:
            outcomes[r.request_id] = Outcome((), (), "no result")
            continue
        fps = tuple(record.of(r.request_id)) if record is not None else ()
        outcomes[r.request_id] = Outcome(tuple(res.generated_tokens), fps, res.error or "")
        stamps[r.request_id] = list(res.timestamps or [])
    return outcomes, stamps


def compare(alone: dict[str, Outcome], batched: dict[str, Outcome]) -> Comparison:
    req_bad = tok_bad = log_bad = errors = tokens = draws = 0
    for rid, ref in alone.items():
        got = batched[rid]
        if ref.error or got.error:
            errors += 1
            req_bad += 1
            continue
        t_diff = sum(a != b for a, b in zip(ref.tokens, got.tokens, strict=False)) + abs(
            len(ref.tokens) - len(got.tokens)
        )
        l_diff = sum(a != b for a, b in zip(ref.logits, got.logits, strict=False)) + abs(
            len(ref.logits) - len(got.logits)
        )
        tokens += len(ref.tokens)
        draws += len(ref.logits)
        tok_bad += t_diff
        log_bad += l_diff
        req_bad += bool(t_diff or l_diff)
    return Comparison(len(alone), tokens, draws, req_bad, tok_bad, log_bad, errors)


class AloneStore:
    """The requests-alone outcomes of one (preset, seed, backend, sampling) kept in a JSON file, so
    that a run cut short (a GPU call's time limit) keeps the requests it finished and a later run
    computes only the rest. A file written for other settings is set aside, never mixed in.

    ``shard`` (``(i, n)``): this process runs its share of the requests alone, beside others on the
    same GPU, and writes ``<name>.shard-i-of-n.json``; every store reads the shard files beside its
    own file too (a request alone gives the same bits in any process)."""

    def __init__(self, path: Path, key: dict[str, Any], shard: tuple[int, int] | None = None) -> None:
        self.key = key
        self.path = (
            path if shard is None else path.with_name(f"{path.stem}.shard-{shard[0]}-of-{shard[1]}.json")
        )
        self.outcomes: dict[str, Outcome] = {}
        for f in [path, *sorted(path.parent.glob(f"{path.stem}.shard-*.json"))]:
            self.outcomes.update(self._read(f, key))

    @staticmethod
    def _read(path: Path, key: dict[str, Any]) -> dict[str, Outcome]:
        # A cache: a file that cannot be read, or an entry that is not an outcome, is recomputed.
        try:
            data = json.loads(path.read_text()) if path.is_file() else {}
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get("outcomes"), dict):
            return {}
        return {
            rid: Outcome(tuple(o["tokens"]), tuple(o["logits"]))
            for rid, o in data["outcomes"].items()
            if isinstance(o, dict)
            and not o.get("error")
            and _integers(o.get("tokens"))
            and _integers(o.get("logits"))
        }

    def add(self, outcomes: dict[str, Outcome]) -> None:
        self.outcomes.update({rid: o for rid, o in outcomes.items() if not o.error})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        body = {rid: asdict(o) for rid, o in self.outcomes.items()}
        tmp.write_text(json.dumps({"key": self.key, "outcomes": body}))
        tmp.replace(self.path)


def _integers(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in value)


def alone_key(
    preset: Preset, reqs: list[Request], seed: int, backend: str, do_sample: bool
) -> dict[str, Any]:
    """What the requests-alone outcomes depend on: the model, the requests, the backend, the sampling."""
    digest = hashlib.sha256(json.dumps([asdict(r) for r in reqs]).encode()).hexdigest()[:16]
    return {
        "shape": asdict(preset.shape),
        "dtype": preset.dtype,
        "requests": digest,
        "seed": seed,
        "backend": backend,
        "do_sample": do_sample,
        "versions": _versions(),
    }


def invariance(
    model: Any,
    reqs: list[Request],
    preset: Preset,
    record: LogitsRecord,
    *,
    nodice: bool,
    do_sample: bool = False,
    say: Callable[[str], None] = print,
    store: AloneStore | None = None,
    chunk: int = 8,
    shard: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """Every request alone, then every schedule; the comparison of each schedule with the requests alone.

    With ``store``, requests already run alone (by an earlier run with the same settings) are read
    from it, the others run ``chunk`` at a time and are added to it after each chunk. With ``shard``
    (``(i, n)``), only the requests at positions i, i + n, … still missing run alone, and no schedule
    runs: several processes share the requests-alone work, and a later run reads what they stored."""
    widest = max(preset.schedules, key=lambda s: s.max_batch_tokens)
    alone_schedule = Schedule(
        "alone", "given", max(widest.max_batch_tokens, max(len(r.prompt) for r in reqs)), 1
    )
    alone: dict[str, Outcome] = {}
    todo = reqs
    if store is not None:
        alone = {r.request_id: store.outcomes[r.request_id] for r in reqs if r.request_id in store.outcomes}
        mine = reqs if shard is None else reqs[shard[0] :: shard[1]]
        todo = [r for r in mine if r.request_id not in alone]
        if alone:
            say(f"  alone: {len(alone)} of {len(reqs)} requests read from {store.path}, {len(todo)} to run")
    # One request per forward pass (max_requests_per_batch=1), through one manager per chunk.
    step = chunk if store is not None else max(1, len(todo))
    for i in range(0, len(todo), step):
        part, _ = generate(
            model,
            todo[i : i + step],
            preset,
            alone_schedule,
            record=record,
            nodice=nodice,
            do_sample=do_sample,
        )
        alone.update(part)
        if store is not None:
            store.add(part)
    if shard is not None:
        where = store.path if store is not None else "-"
        say(f"  alone, shard {shard[0]} of {shard[1]}: {len(todo)} requests run, stored in {where}")
        return {"shard": list(shard), "alone_run": len(todo)}
    alone = {r.request_id: alone[r.request_id] for r in reqs}
    say(f"  alone: {sum(len(o.tokens) for o in alone.values())} tokens")
    schedules = {}
    for i, schedule in enumerate(preset.schedules):
        order = arrival(reqs, schedule.order, i)
        batched, _ = generate(
            model, order, preset, schedule, record=record, nodice=nodice, do_sample=do_sample
        )
        c = compare(alone, batched)
        schedules[schedule.name] = {**asdict(c), "schedule": asdict(schedule)}
        say(
            f"  {schedule.name}: {c.token_mismatches} token and {c.logit_mismatches} logits mismatches "
            f"over {c.tokens} tokens ({c.requests_mismatched}/{c.requests} requests differ)"
        )
    return {"alone_tokens": sum(len(o.tokens) for o in alone.values()), "schedules": schedules}


def throughput(
    model: Any,
    reqs: list[Request],
    preset: Preset,
    concurrency: int,
    *,
    nodice: bool,
    timeout_s: float = 3600.0,
    cuda_graphs: bool | None = None,
) -> dict[str, Any]:
    """Generated tokens per second and the median time between two tokens of a request, at ``concurrency``.

    A run stopped by ``timeout_s`` counts the requests finished by then (``complete`` is false).
    """
    tokens_budget = max(preset.schedules, key=lambda s: s.max_batch_tokens).max_batch_tokens
    schedule = Schedule(f"c{concurrency}", "given", tokens_budget, concurrency)
    settings: dict[str, Any] = {}
    steps, fast = LEDGER.steps, LEDGER.fast_steps
    start = time.perf_counter()
    out, stamps = generate(
        model,
        reqs,
        preset,
        schedule,
        record=None,
        nodice=nodice,
        timestamps=True,
        timeout_s=timeout_s,
        cuda_graphs=cuda_graphs,
        settings=settings,
    )
    wall = time.perf_counter() - start
    generated = sum(len(o.tokens) for o in out.values())
    gaps = sorted(b - a for s in stamps.values() for a, b in itertools.pairwise(s))
    step = gaps[len(gaps) // 2] if gaps else None
    return {
        "requests": len(reqs),
        "tokens": generated,
        "wall_s": wall,
        "tokens_per_s": generated / wall if wall else None,
        "decode_step_ms": None if step is None else step * 1000.0,
        "errors": sum(bool(o.error) and o.error != "no result" for o in out.values()),
        "complete": all(o.error != "no result" for o in out.values()),
        "cuda_graphs": settings.get("cuda_graphs"),
        # Steps scheduled, and of them those sent down the decode fast path (graphed where it is).
        "steps": LEDGER.steps - steps,
        "decode_fast_path_steps": LEDGER.fast_steps - fast,
    }


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def forward_times(model: Any, preset: Preset, reps: int = 5) -> dict[str, float]:
    """One prefill of B·S tokens and one decode step at batch B over S cached tokens, median ms."""
    from transformers import DynamicCache

    dev = next(model.parameters()).device
    b, s = preset.forward_batch, preset.forward_seq
    ids = torch.randint(1, preset.shape.vocab, (b, s), device=dev, generator=None)
    times: dict[str, list[float]] = {"prefill_ms": [], "decode_ms": []}
    with torch.no_grad():
        for _ in range(reps + 1):
            _sync(dev)
            t = time.perf_counter()
            model(ids, use_cache=False, logits_to_keep=1)
            _sync(dev)
            times["prefill_ms"].append((time.perf_counter() - t) * 1000)
        cache = DynamicCache(config=model.config)
        model(ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
        step = ids[:, -1:]
        for _ in range(reps + 1):
            _sync(dev)
            t = time.perf_counter()
            model(step, past_key_values=cache, use_cache=True)
            _sync(dev)
            times["decode_ms"].append((time.perf_counter() - t) * 1000)
    return {k: sorted(v[1:])[len(v[1:]) // 2] for k, v in times.items()}


KERNEL_KINDS = (
    ("attention", ("attn", "attention", "flash", "fmha", "sdpa", "paged", "decode", "varlen")),
    ("gemm", ("gemm", "matmul", "nvjet", "xmma", "cutlass", "sm90", "cublas", "_mm")),
    ("norm", ("norm",)),
    ("sampling", ("sampl", "softmax", "topk", "sort", "multinomial", "argmax")),
)


def kernel_kind(name: str) -> str:
    low = name.lower()
    for kind, keys in KERNEL_KINDS:
        if any(k in low for k in keys):
            return kind
    return "other"


def _kernel_profile(fn: Callable[[], Any], device: torch.device, top: int = 12) -> dict[str, Any]:
    """Wall time of ``fn`` and the device kernels it ran: time per kind, the ``top`` kernels by time."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    _sync(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t = time.perf_counter()
        fn()
        _sync(device)
        wall = time.perf_counter() - t
    per: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            slot = per.setdefault(e.name, [0, 0.0])
            slot[0] += 1
            slot[1] += e.time_range.elapsed_us() / 1000.0
    kernel_ms = sum(v[1] for v in per.values())
    kinds: dict[str, float] = {}
    for name, (_, ms) in per.items():
        kinds[kernel_kind(name)] = kinds.get(kernel_kind(name), 0.0) + ms
    ranked = sorted(per.items(), key=lambda kv: -kv[1][1])[:top]
    return {
        "wall_ms": wall * 1000.0,
        "kernel_ms": kernel_ms,
        "kernels": sum(int(v[0]) for v in per.values()),
        "kinds_ms": dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
        "top": [{"name": n[:120], "calls": int(v[0]), "ms": v[1], "kind": kernel_kind(n)} for n, v in ranked],
    }


def _profile_line(p: dict[str, Any]) -> str:
    kinds = ", ".join(f"{k} {v:.1f}" for k, v in p["kinds_ms"].items())
    return f"wall {p['wall_ms']:.1f} ms, kernels {p['kernel_ms']:.1f} ms ({kinds})"


def profile_forward(model: Any, preset: Preset) -> dict[str, Any]:
    """Kernel-time breakdown of one prefill of B·S tokens and one decode step at batch B (after a warm-up)."""
    from transformers import DynamicCache

    dev = next(model.parameters()).device
    b, s = preset.forward_batch, preset.forward_seq
    gen = torch.Generator(device=dev).manual_seed(1)
    ids = torch.randint(1, preset.shape.vocab, (b, s), device=dev, generator=gen)
    out: dict[str, Any] = {}
    with torch.no_grad():
        model(ids, use_cache=False, logits_to_keep=1)
        out["prefill"] = _kernel_profile(lambda: model(ids, use_cache=False, logits_to_keep=1), dev)
        cache = DynamicCache(config=model.config)
        model(ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
        step = ids[:, -1:]
        model(step, past_key_values=cache, use_cache=True)
        out["decode"] = _kernel_profile(lambda: model(step, past_key_values=cache, use_cache=True), dev)
    return out


def profile_generate(
    model: Any,
    reqs: list[Request],
    preset: Preset,
    concurrency: int,
    *,
    nodice: bool,
    cuda_graphs: bool | None = None,
) -> dict[str, Any]:
    """Kernel-time breakdown of a short ``generate_batch`` run (after an untimed one): kernels vs wall."""
    dev = next(model.parameters()).device
    throughput(model, reqs, preset, concurrency, nodice=nodice, cuda_graphs=cuda_graphs)
    result: dict[str, Any] = {}

    def run() -> None:
        result.update(throughput(model, reqs, preset, concurrency, nodice=nodice, cuda_graphs=cuda_graphs))

    prof = _kernel_profile(run, dev)
    return {"run": prof, "tokens": result.get("tokens"), "decode_step_ms": result.get("decode_step_ms")}


def _write(path: Path | None, report: dict[str, Any]) -> None:
    """The report, whole or not at all (through a symlink); an error line when it cannot be written."""
    if path is not None:
        write_report(path, json.dumps(report, indent=1) + "\n", "--json")


def _shared_copy(model: Any) -> Any:
    """A second module tree over the same parameter and buffer tensors (no second copy of the weights)."""
    memo: dict[int, Any] = {id(t): t for t in [*model.parameters(), *model.buffers()]}
    return copy.deepcopy(model, memo)


def _versions() -> dict[str, str]:
    import transformers
    import triton

    import nodice

    return {
        "nodice": nodice.__version__,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "transformers": transformers.__version__,
    }


def run_e2e(
    preset: Preset,
    device: str,
    *,
    backends: list[str] | None = None,
    phases: tuple[str, ...] = ("invariance", "tax", "forward"),
    seed: int = 0,
    verify: bool = True,
    sample: bool = False,
    json_path: Path | None = None,
    command: str = "",
    control_requests: int | None = None,
    tax_timeout_s: float = 3600.0,
    alone_dir: Path | None = None,
    alone_shard: tuple[int, int] | None = None,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The whole bench; returns the report (and rewrites ``json_path`` after every phase and backend).

    ``alone_dir`` keeps each backend's requests-alone outcomes (``alone-<backend>[-sampled].json``)
    across runs: see :class:`AloneStore`."""
    from nodice.integrations.transformers.enable import uninstall_sampler

    dev = torch.device(device)
    chosen = backends or available_backends(device)
    report: dict[str, Any] = {
        "kind": "nodice-bench-e2e",
        "command": command,
        "device": device,
        "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "versions": _versions(),
        "preset": preset.to_dict(),
        "backends": chosen,
        "seed": seed,
        "invariance": {},
        "sampled": {},
        "tax": {},
        "forward": {},
        "profile": {},
        "integration": None,
        "stats": None,
    }
    stock = build_model(preset.shape, preset.dtype, device, seed)
    ours = _shared_copy(stock)
    integ: Integration = enable(ours, verify=verify, seed=seed)
    report["integration"] = integ.report.to_dict()
    say(integ.report.summary())
    stock_record = LogitsRecord()
    reqs = requests(preset.mix, preset.requests, preset.shape.vocab, seed)
    # The stock backends (a control: they need only show mismatches) and the sampled check may run on
    # the first ``control_requests`` requests; greedy nodice always runs on all of them.
    control = reqs[:control_requests] if control_requests else reqs
    report["control_requests"] = len(control)

    def store_for(backend: str, these: list[Request], do_sample: bool) -> AloneStore | None:
        if alone_dir is None:
            return None
        name = "alone-" + re.sub(r"[^A-Za-z0-9_.-]", "_", backend) + ("-sampled" if do_sample else "")
        key = alone_key(preset, these, seed, backend, do_sample)
        return AloneStore(alone_dir / f"{name}.json", key, shard=alone_shard)

    def model_for(backend: str) -> Any:
        """The model for ``backend``, with the mode on for nodice and off for the stock backends."""
        if is_nodice(backend):
            integ.resume()
            return ours
        integ.suspend()
        stock.set_attn_implementation(attn_implementation(backend))
        return stock

    def graphs(backend: str) -> bool:
        return backend.endswith(GRAPHS)

    if "invariance" in phases:
        _install_sampler(stock, None, seed, stock_record)
        # The CUDA-graph variant of a stock backend is a speed reference (the invariance runs record
        # every batch through nodice's scheduler, and a recorded stock run stays eager): its control
        # is the backend without them. nodice-eager is nodice without its graphs, a speed reference.
        for backend in [b for b in chosen if graphs(b) or b == EAGER]:
            control_of = "nodice" if backend == EAGER else attn_implementation(backend)
            say(f"invariance, {backend}: not measured (a speed reference; {control_of} is measured)")
        for backend in [b for b in chosen if not graphs(b) and b != EAGER]:
            these = reqs if backend == "nodice" else control
            say(
                f"invariance, {backend}: {len(these)} requests alone, "
                f"then under {len(preset.schedules)} schedules"
            )
            record = integ.record if backend == "nodice" else stock_record
            section = report["invariance"] if alone_shard is None else report.setdefault("alone_shards", {})
            section[backend] = invariance(
                model_for(backend),
                these,
                preset,
                record,
                nodice=backend == "nodice",
                say=say,
                store=store_for(backend, these, False),
                shard=alone_shard,
            )
            _write(json_path, report)
        if sample and "nodice" in chosen:
            say(
                f"invariance, nodice, sampled (temperature 0.8, top-p 0.95, a seed per request): "
                f"{len(control)} requests"
            )
            section = report["sampled"] if alone_shard is None else report.setdefault("alone_shards", {})
            section["nodice (sampled)" if alone_shard else "nodice"] = invariance(
                model_for("nodice"),
                control,
                preset,
                integ.record,
                nodice=True,
                do_sample=True,
                say=say,
                store=store_for("nodice", control, True),
                shard=alone_shard,
            )
            _write(json_path, report)
        uninstall_sampler(stock)
    integ.record.active = False
    # The forward pass and the profile first: short, and they say where the time goes.
    if "forward" in phases:
        report["forward"]["nodice"] = forward_times(model_for("nodice"), preset)
        report["forward"]["sdpa"] = forward_times(model_for("sdpa"), preset)
        say(f"forward: {report['forward']}")
        _write(json_path, report)
    if "profile" in phases:
        report["profile"] = {"forward": {}, "generate": {}}
        for name in ("nodice", "sdpa"):
            report["profile"]["forward"][name] = profile_forward(model_for(name), preset)
            for step, prof in report["profile"]["forward"][name].items():
                say(f"profile, {step}, {name}: {_profile_line(prof)}")
            _write(json_path, report)
        mix = preset.tax_mixes[-1]
        c = min(preset.concurrency)
        gen_reqs = [
            replace(r, max_new_tokens=min(r.max_new_tokens, 24))
            for r in requests(mix, c, preset.shape.vocab, seed + 1, shared_prompt=False)
        ]
        for backend in chosen:
            prof = profile_generate(
                model_for(backend),
                gen_reqs,
                preset,
                c,
                nodice=is_nodice(backend),
                cuda_graphs=graph_setting(backend),
            )
            prof["mix"], prof["concurrency"] = mix.name, c
            report["profile"]["generate"][backend] = prof
            say(f"profile, generate_batch, {backend}: {_profile_line(prof['run'])}")
            _write(json_path, report)
    if "tax" in phases:
        for c in preset.concurrency:  # the lowest concurrency of every mix first
            for mix in preset.tax_mixes:
                mix_reqs = requests(mix, 2 * c, preset.shape.vocab, seed + c, shared_prompt=False)
                row = report["tax"].setdefault(mix.name, {})[str(c)] = {}
                for backend in chosen:
                    # Untimed first: kernels compiled for this mix's shapes, the manager's buffers.
                    warm = [replace(r, max_new_tokens=min(r.max_new_tokens, 8)) for r in mix_reqs[:c]]
                    mine, setting = is_nodice(backend), graph_setting(backend)
                    throughput(model_for(backend), warm, preset, c, nodice=mine, cuda_graphs=setting)
                    row[backend] = throughput(
                        model_for(backend),
                        mix_reqs,
                        preset,
                        c,
                        nodice=mine,
                        timeout_s=tax_timeout_s,
                        cuda_graphs=setting,
                    )
                    say(
                        f"tax, {mix.name}, concurrency {c}, {backend}: "
                        f"{row[backend]['tokens_per_s']:.1f} tokens/s, "
                        f"{row[backend]['decode_step_ms'] or 0:.1f} ms per decode step"
                        + ("" if row[backend]["complete"] else f" (stopped at {tax_timeout_s:.0f} s)")
                    )
                    _write(json_path, report)
    integ.suspend()
    report["stats"] = {k: asdict(v) for k, v in integ.stats().items()}
    _write(json_path, report)
    return report
