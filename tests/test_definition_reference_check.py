"""A FlashInfer-Bench definition whose reference cannot judge a solution is the definition's fault.

A reference that returns NaN or no finite value for the gate's finite inputs, that raises, that
returns other than the definition's outputs, and a definition whose sizes its operation cannot have
(an axis of 0, an MoE routing each token to more experts than it has) are each one line naming the
definition, exit code 2, never a crash of the solution's nor a pass or a failure on the reference's
numbers. A reference that couples the samples of a batch is ``not_applicable``, as a coupling
``--reference`` file is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodice.errors import DefinitionError
from nodice.gate.pipeline import check
from nodice.integrations.flashinfer_bench import prepare
from nodice.tasks import get_task
from nodice.tasks.definition import definition_task_name
from tests.conftest import EXAMPLES, run_cli

FIB = EXAMPLES / "flashinfer_bench"
RMSNORM = FIB / "rmsnorm_h4096.json"
RMSNORM_ROW = FIB / "rmsnorm_h4096_torch_row.json"
DECODE = FIB / "gqa_paged_decode_h4_kv2_d32_ps1.json"
DECODE_HEAD = FIB / "gqa_paged_decode_h4_kv2_d32_ps1_triton_head.json"
MOE = FIB / "trtllm_fp4_block_scale_moe_topk2_e8_h256_i128.json"
MOE_TOKEN = FIB / "trtllm_fp4_block_scale_moe_topk2_e8_h256_i128_torch_token.json"
FP8_MOE = FIB / "moe_fp8_block_scale_renorm_topk2_e8_h256_i128.json"
RETURN = "    return y.to(hidden_states.dtype)"


def _edited(tmp_path: Path, source: Path, consts: dict[str, int] | None = None, **code: str) -> Path:
    """``source`` with its const axes set to ``consts`` and each ``old=new`` pair of ``code`` (the
    keys ``old``/``new``, ``old2``/``new2`` …) replaced in its reference code."""
    data = json.loads(source.read_text())
    for axis, value in (consts or {}).items():
        data["axes"][axis]["value"] = value
    for key in sorted(k for k in code if k.startswith("old")):
        assert code[key] in data["reference"], code[key]
        data["reference"] = data["reference"].replace(code[key], code["new" + key.removeprefix("old")])
    out = tmp_path / source.name
    out.write_text(json.dumps(data))
    return out


def _refused(solution: Path, definition: Path) -> dict[str, object]:
    """``nodice check --json`` that cannot judge: exit 2, verdict ``error``, its one line on stderr."""
    r = run_cli("check", str(solution), "--definition", str(definition), "--device", "cpu", "--json")
    assert r.returncode == 2, r.stdout + r.stderr
    payload: dict[str, object] = json.loads(r.stdout)
    assert payload["verdict"] == "error" and payload["exit_code"] == 2
    assert r.stderr == f"{payload['error']}\n"
    assert "kernel crashed" not in r.stderr and "Traceback" not in r.stderr
    return payload


@pytest.mark.parametrize(
    ("returned", "line"),
    [
        (
            "    return (y * float('nan')).to(hidden_states.dtype)",
            "its reference returns NaN at output[0, 0] for finite inputs: no solution can be judged "
            "against it",
        ),
        (
            "    return (y.abs() * float('-inf')).to(hidden_states.dtype)",
            "its reference returns no finite value in output for finite inputs (output[0, 0] is -inf): "
            "no solution can be judged against it",
        ),
    ],
    ids=["nan", "minus_inf"],
)
def test_a_reference_with_no_number_to_compare_is_refused_not_passed(
    tmp_path: Path, returned: str, line: str
) -> None:
    """Before, any solution passed correctness against it (a NaN compares as within tolerance)."""
    definition = _edited(tmp_path, RMSNORM, old=RETURN, new=returned)
    payload = _refused(RMSNORM_ROW, definition)
    assert payload["error"] == f"bad definition: definition rmsnorm_h4096: {line}"


@pytest.mark.parametrize(
    ("solution", "source", "consts", "code", "line"),
    [
        (
            RMSNORM_ROW,
            RMSNORM,
            {},
            {"old": RETURN, "new": "    return None"},
            "definition rmsnorm_h4096: its reference returns NoneType for output, not a tensor",
        ),
        (
            DECODE_HEAD,
            DECODE,
            {"head_dim": 0},
            {"old": "head_dim == 32", "new": "head_dim == 0"},
            "definition gqa_paged_decode_h4_kv2_d32_ps1: const axis head_dim is 0: a size must be at least 1",
        ),
        (
            MOE_TOKEN,
            MOE,
            {"hidden_size": 100},
            {},  # the reference still holds H = 256
            "definition trtllm_fp4_block_scale_moe_topk2_e8_h256_i128: its reference raised RuntimeError "
            "at line 48: source tensor shape must match self tensor shape",
        ),
    ],
    ids=["returns_none", "head_dim_0", "moe_hidden_100"],
)
def test_a_reference_or_sizes_that_cannot_work_are_the_definitions_fault(
    tmp_path: Path, solution: Path, source: Path, consts: dict[str, int], code: dict[str, str], line: str
) -> None:
    """Before, each read ``kernel crashed: internal error`` (or a ZeroDivisionError)."""
    definition = _edited(tmp_path, source, consts, **code)
    payload = _refused(solution, definition)
    assert str(payload["error"]).startswith(f"bad definition: {line}"), payload["error"]


def test_a_batch_coupled_reference_is_not_applicable(tmp_path: Path) -> None:
    """An RMSNorm whose mean runs over the whole batch: no solution can be invariant, none is blamed."""
    coupled = _edited(
        tmp_path,
        RMSNORM,
        old="x.pow(2).mean(dim=-1, keepdim=True)",
        new="x.pow(2).mean()",
    )
    r = run_cli("check", str(RMSNORM_ROW), "--definition", str(coupled), "--device", "cpu", "--json")
    assert r.returncode == 2, r.stdout + r.stderr
    payload = json.loads(r.stdout)
    assert payload["verdict"] == "not_applicable" and payload["exit_code"] == 2
    error = str(payload["error"])
    assert error.startswith(
        "not batch-applicable: definition rmsnorm_h4096's reference couples the samples of a batch: "
    ), error
    assert "(<rmsnorm_h4096.reference>:12: x.pow(2).mean() reduces over every element" in error
    assert "\n" not in error and "correctness" not in payload["stages"]

    # The published definition is checked the same way, and is per sample.
    prepared = prepare(RMSNORM_ROW, RMSNORM, tmp_path / "published")
    result = check(
        str(prepared.candidate), prepared.task, device="cpu", entry=prepared.entry, dynamic=False, seed=3
    )
    assert result.verdict == "pass", result.reason
    stage = result.stage("applicability")
    assert stage is not None and stage.verdict == "pass"


@pytest.mark.parametrize(
    ("source", "consts", "line"),
    [
        (MOE, {"top_k": 0}, "top_k 0 is not between 1 and num_experts (8)"),
        (MOE, {"top_k": 9}, "top_k 9 is not between 1 and num_experts (8)"),
        (FP8_MOE, {"hidden_size": 100}, "hidden_size 100 is not a multiple of 128"),
    ],
    ids=["top_k_0", "top_k_9_of_8", "block_scales_of_100"],
)
def test_moe_sizes_its_routing_cannot_have_are_refused_when_read(
    tmp_path: Path, source: Path, consts: dict[str, int], line: str
) -> None:
    definition = _edited(tmp_path, source, consts)
    with pytest.raises(DefinitionError) as exc:
        get_task(definition_task_name(definition))
    name = source.stem
    assert exc.value.line().startswith(f"bad definition: definition {name}: {line}"), exc.value.line()


def test_an_moe_routing_to_more_experts_than_it_has_is_one_line_at_the_command_line(tmp_path: Path) -> None:
    definition = _edited(tmp_path, MOE, {"top_k": 9}, old="TOP_K = 2", new="TOP_K = 9")
    payload = _refused(MOE_TOKEN, definition)
    assert payload["error"] == (
        "bad definition: definition trtllm_fp4_block_scale_moe_topk2_e8_h256_i128: top_k 9 is not between "
        "1 and num_experts (8): each token is routed to top_k distinct experts"
    )
