"""Hostile candidates (tests/adversarial/) against the evaluator: none accepted, none fatal, none lost.

Each group runs in one persistent evaluator, so a crash or cheat also proves the
worker is replaced and the next candidate is judged normally; every group ends
by counting the store's rows against the evaluations attempted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nodice.evaluation import Evaluation, Evaluator

HOSTILE = Path(__file__).parent / "adversarial"

# candidate file → (verdict, rule for cheats or a phrase of the reason for errors)
FAILURES = {
    "crash_segfault.py": ("error", "SIGSEGV"),
    "crash_raises.py": ("error", "RuntimeError"),
    "crash_reports_environment.py": ("error", "ENV="),
    "crash_os_exit.py": ("error", "status 3"),
    "oom_single_allocation.py": ("error", "crashed"),
    "crash_exit_at_import.py": ("error", "exit(0)"),
    "oom_gradual.py": ("error", "out of memory"),
    # Right values in a strided layout: the output contract is broken, nobody is accused.
    "bad_output_column_major.py": ("error", "bad output: y is a non-contiguous view"),
}
GPU_CASES = {
    "gpu_side_stream.py": ("cheat", "unsynchronized-work"),
    "gpu_illegal_address.py": ("error", "crashed"),
    "cheat_library_runtime.py": ("cheat", "library-call"),
}
CHEATS_RUNTIME = {
    "cheat_library_runtime.py": ("cheat", "library-call"),
    "cheat_reference_call.py": ("cheat", "library-call"),
    "cheat_library_in_bench.py": ("cheat", "library-call"),
    "cheat_timer_patch.py": ("cheat", "harness-tampering"),
    "cheat_tolerance_patch.py": ("cheat", "harness-tampering"),
    "cheat_tensor_subclass.py": ("cheat", "fake-output"),
    "cheat_meta_output.py": ("cheat", "fake-output"),
    "cheat_output_aliases_input.py": ("cheat", "fake-output"),
    "cheat_expanded_view.py": ("cheat", "fake-output"),
    "cheat_input_mutation.py": ("cheat", "input-mutation"),
}
CHEATS_PROBED = {
    "cheat_library_static.py": ("cheat", "library-call"),
    "cheat_event_patch.py": ("cheat", "harness-tampering"),
    "cheat_frame_walk.py": ("cheat", "harness-tampering"),
    "cheat_late_writer.py": ("cheat", "unsynchronized-work"),
    "cheat_background_thread.py": ("cheat", "background-thread"),
    "cheat_pointer_cache.py": ("cheat", "cached-output"),
    "cheat_stale_memory.py": ("cheat", "uninitialised-memory"),
    "cheat_precision.py": ("cheat", "precision-downgrade"),
}


def _run_group(
    cases: dict[str, tuple[str, str]], store: Path, timeout_s: float, device: str = "cpu"
) -> dict[str, Evaluation]:
    attempts = 0
    wrong: list[str] = []
    seen: dict[str, Evaluation] = {}
    limits = {"timeout_s": timeout_s, "memory_mb": 2048}
    with Evaluator(device=device, isolation="persistent", store=store, **limits) as ev:  # type: ignore[arg-type]
        # An honest candidate before and after the hostile ones: the evaluator still judges normally.
        control = "control_honest.py" if device == "cpu" else "control_seed.py"
        for name in [control, *cases, control]:
            verdict, expected = cases.get(name, ("pass", ""))
            e = ev.evaluate(HOSTILE / name, "rmsnorm", seed=11)
            attempts += 1
            seen[name] = e
            what = e.cheat_rule if verdict == "cheat" else e.check.reason
            if e.verdict != verdict or (expected and expected not in (what or "")):
                wrong.append(f"{name}: expected {verdict} ({expected}), got {e.verdict}: {e.check.reason}")
            if name == control and not (e.scores and e.geomean > 0):
                wrong.append(f"control got no score: {e.check.reason}")
        assert ev.store is not None
        stored = ev.store.count()
        verdicts = [x.verdict for x in ev.store.evaluations()]
    assert not wrong, "\n".join(wrong)
    assert stored == attempts
    assert verdicts.count("pass") == 2
    return seen


# Its own group: the fixed limit that ends it is short, and no other case should race that limit (a
# gradual allocation on a loaded machine is stopped by the memory limit, however long it takes).
HANGS = {"hang_in_call.py": ("error", "timed out after 8 s in the anti-cheat probes (fixed 8 s limit")}


@pytest.mark.timeout(300)
def test_failures_cost_one_candidate_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _run_group(HANGS, tmp_path / "hangs.sqlite", timeout_s=8)
    monkeypatch.setenv("NODICE_TEST_API_KEY", "do-not-leak")
    seen = _run_group(FAILURES, tmp_path / "failures.sqlite", timeout_s=60)
    # The worker's environment is an allow-list: the caller's secrets never reach a candidate.
    env = seen["crash_reports_environment.py"].check.reason
    assert "PATH" in env and "NODICE_TEST_API_KEY" not in env


@pytest.mark.gpu
@pytest.mark.timeout(600)
def test_cuda_side_streams_and_broken_contexts(tmp_path: Path) -> None:
    _run_group(GPU_CASES, tmp_path / "gpu.sqlite", timeout_s=120, device="cuda")


@pytest.mark.timeout(300)
def test_runtime_cheats_are_named(tmp_path: Path) -> None:
    _run_group(CHEATS_RUNTIME, tmp_path / "runtime.sqlite", timeout_s=60)


@pytest.mark.timeout(300)
def test_static_and_probed_cheats_are_named(tmp_path: Path) -> None:
    _run_group(CHEATS_PROBED, tmp_path / "probed.sqlite", timeout_s=60)
