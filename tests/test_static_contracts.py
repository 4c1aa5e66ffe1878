"""Contracts: the DSL, the shipped layers for every family, and user contracts with --contract."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from nodice.errors import ContractError
from nodice.gate.static import contract_for, parse_contract_file, run_static, shipped_contracts
from nodice.gate.static.contracts import SHIPPED_DIR, batch_symbols
from nodice.tasks import CATALOG, get_task

FAMILIES = ("normalization", "gemm", "attention", "moe", "sampling", "linear attention")


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_dsl_declares_sources_and_protected_parameters(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "mine.py",
        """
        contract("my_norm", subtype_of="normalization", tasks=["rmsnorm"])
        batch_symbols("n_requests")
        batch_arg("x", axis=0, note="rows")
        protect("ROW_GROUPS", aliases=["row_groups", "groups_per_row"], mechanism="work_partitioning",
                guidance="fix the group size")
        reduction_tiles("TILE_HIDDEN")
        """,
    )
    c = parse_contract_file(p)
    assert (c.name, c.scope, c.family, c.tasks) == ("my_norm", "subtype", "normalization", ("rmsnorm",))
    assert c.is_batch_symbol("N_REQUESTS") and c.is_reduction_tile("tile_hidden")
    prot = c.protected_for("Groups_Per_Row")
    assert prot is not None and prot.name == "ROW_GROUPS" and prot.guidance == "fix the group size"
    assert c.batch_args == (("x", 0, "rows"),)


def test_importing_the_dsl_works_too_and_is_cached(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "imported.py",
        """
        from nodice.gate.static.contracts import contract, protect
        contract("imported")
        protect("NUM_SPLITS", aliases=["pieces"])
        """,
    )
    assert parse_contract_file(p) is parse_contract_file(str(p))
    assert parse_contract_file(p).protected_for("pieces") is not None
    with pytest.raises(ContractError):
        batch_symbols("outside a contract file")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("contract('x'\n", "syntax error"),
        ("protect('P', mechanism='telepathy')", "unknown mechanism"),
        ("raise RuntimeError('boom')", "RuntimeError: boom"),
        ("batch_symbols(3)", "must be a non-empty string"),
    ],
)
def test_bad_contract_is_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ContractError, match=message):
        parse_contract_file(write(tmp_path, "bad.py", text))
    with pytest.raises(ContractError, match="no such contract"):
        parse_contract_file(tmp_path / "missing.py")


def test_every_family_of_the_catalog_has_a_shipped_contract() -> None:
    contracts = shipped_contracts()
    scopes = {c.scope for c in contracts}
    assert {"global", "family", "subtype"} <= scopes
    families = {c.family.replace("_", " ") for c in contracts if c.scope == "family"}
    assert set(FAMILIES) <= families
    glob = next(c for c in contracts if c.scope == "global")
    for name in ("num_splits", "split_k", "SPLIT_K", "kv_splits", "num_kv_splits"):
        assert glob.protected_for(name).name == "NUM_SPLITS"  # type: ignore[union-attr]
    for name in ("seed", "philox_offset"):
        assert glob.protected_for(name).name == "RNG_SEED"  # type: ignore[union-attr]
    assert glob.protected_for("offset") is None and glob.protected_for("offset", rng_context=True) is not None
    assert all(p.parent == SHIPPED_DIR for p in SHIPPED_DIR.glob("*.py"))


def test_layers_merge_global_family_and_subtype() -> None:
    decode = contract_for("attention_decode", "attention")
    assert decode.protected_for("num_kv_splits") is not None  # family + subtype
    assert decode.protected_for("num_splits") is not None  # global
    assert ("k_cache", 0) in {(n, a) for n, a, _ in decode.batch_args}  # subtype: the page pool
    gemm = contract_for("gemm", "gemm")
    assert gemm.is_reduction_tile("BLOCK_K") and not gemm.is_reduction_tile("BLOCK_M")
    assert contract_for("rmsnorm", "normalization").protected_for("capacity") is None  # moe only
    assert contract_for("moe", "moe").protected_for("capacity") is not None
    assert set(CATALOG) >= {"rmsnorm", "gemm", "attention_decode", "moe", "sampling", "gdn"}


def test_user_contract_adds_a_protected_parameter(tmp_path: Path) -> None:
    cand = write(
        tmp_path,
        "cand.py",
        """
        import mylib

        def kernel(x, weight, eps):
            return mylib.rmsnorm(x, weight, eps, row_groups=max(1, 64 // x.shape[0]))
        """,
    )
    task = get_task("rmsnorm")
    assert run_static(cand, task)[0] == []
    user = write(tmp_path, "groups.py", "contract('groups')\nprotect('ROW_GROUPS', aliases=['row_groups'])\n")
    violations, _ = run_static(cand, task, [user])
    assert [(f.protected, f.mechanism) for f in violations] == [("ROW_GROUPS", "work_partitioning")]
