"""Flows through module-level state: a batch-derived value written to a global, a module-level dict,
cache or object by one function and read at a launch by another is found, whatever the order of the
write and the read; the same state written from batch-independent sizes passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodice.gate.static import run_static
from nodice.tasks import get_task

ROOT = Path(__file__).resolve().parents[1]
RMSNORM = (ROOT / "nodice" / "examples" / "rmsnorm" / "seed.py").read_text()
# The seed's kernel and imports; each case supplies its own host side.
RMSNORM_KERNEL = RMSNORM[: RMSNORM.index("\n\ndef kernel(")] + "\n"
GEMM = (ROOT / "nodice" / "examples" / "gemm" / "tile_config_from_m.py").read_text()
GEMM_KERNEL = GEMM[GEMM.index("import torch") : GEMM.index("\n\n# (largest M")] + "\n"
GEMM_KERNEL += GEMM[GEMM.index("@triton.jit") : GEMM.index("\n\ndef kernel(")] + "\n"

DATACLASS_STATE = """
from dataclasses import dataclass


@dataclass
class _State:
    block: int = 1024


_STATE = _State()
"""

LAUNCH = "    _rmsnorm_row[(batch,)](x, weight, y, hidden, eps, BLOCK_H={tile}, num_warps=4)\n"

# Host sides that reach BLOCK_H (the reduction tile) with a value derived from the batch.
VIOLATIONS = {
    # The launch reads what the previous call wrote.
    "global_written_after_the_launch": """
_TILE = 1024


def _remember(rows):
    global _TILE
    _TILE = 512 if rows <= 4 else 1024


def kernel(x, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
"""
    + LAUNCH.format(tile="_TILE")
    + "    _remember(batch)\n    return y\n",
    "global_tuple_written_by_augmented_assignment": """
_TILE = 256
_CALLS = 0


def _grow(rows):
    global _TILE, _CALLS
    _CALLS += 1
    if rows > 64:
        _TILE *= 2


def kernel(x, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
"""
    + LAUNCH.format(tile="min(_TILE, 1024)")
    + "    _grow(batch)\n    return y\n",
    "module_dict_item": """
_CFG = {"tile": 1024}


def _configure(rows):
    _CFG["tile"] = 512 if rows <= 4 else 1024


def kernel(x, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
"""
    + LAUNCH.format(tile='_CFG["tile"]')
    + "    _configure(batch)\n    return y\n",
    "module_dict_filled_lazily": """
_CFG = {}


def _configure(rows):
    _CFG["tile"] = 512 if rows <= 4 else 1024


def kernel(x, weight, eps):
    batch, hidden = x.shape
    if not _CFG:
        _configure(batch)
    y = torch.empty_like(x)
"""
    + LAUNCH.format(tile='_CFG["tile"]')
    + "    return y\n",
    "module_dict_entry_under_an_unknown_key": """
_CFG = {"tile": 1024}


def _configure(overrides):
    for name, value in overrides.items():
        _CFG[name] = value


def kernel(x, weight, eps):
    batch, hidden = x.shape
    _configure({"tile": 512 if batch <= 4 else 1024})
    y = torch.empty_like(x)
"""
    + LAUNCH.format(tile='_CFG["tile"]')
    + "    return y\n",
    "nested_cache_entry": """
_CFG = {}


def _configure(hidden, rows):
    _CFG.setdefault(hidden, {})["tile"] = 512 if rows <= 4 else 1024


def kernel(x, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
    cfg = _CFG.get(hidden, {"tile": 1024})
"""
    + LAUNCH.format(tile='cfg["tile"]')
    + "    _configure(hidden, batch)\n    return y\n",
    "module_list_appended": """
_TILES = [1024]


def kernel(x, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
"""
    + LAUNCH.format(tile="_TILES[-1]")
    + "    _TILES.append(512 if batch <= 4 else 1024)\n    return y\n",
    "cache_setdefault_keyed_by_hidden": """
_CACHE = {}


def _choose(rows):
    return 512 if rows <= 4 else 1024


def _tile(hidden, rows):
    return _CACHE.setdefault(hidden, _choose(rows))


def kernel(x, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
"""
    + LAUNCH.format(tile="_tile(hidden, batch)")
    + "    return y\n",
    "cache_filled_by_update_read_elsewhere": """
_CACHE = {}


def _warm(rows, hidden):
    _CACHE.update({hidden: 512 if rows <= 4 else 1024})


def kernel(x, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
"""
    + LAUNCH.format(tile="_CACHE.get(hidden, 1024)")
    + "    _warm(batch, hidden)\n    return y\n",
    "lru_cache_keyed_by_derived_rows": """
import functools


@functools.lru_cache(maxsize=None)
def _pick(n_rows):
    return 512 if n_rows <= 4 else 1024


def kernel(x, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
"""
    + LAUNCH.format(tile="_pick(x.numel() // hidden)")
    + "    return y\n",
    "dataclass_state_attribute": DATACLASS_STATE
    + """

def kernel(x, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
"""
    + LAUNCH.format(tile="_STATE.block")
    + "    _STATE.block = 512 if batch <= 4 else 1024\n    return y\n",
    "object_attribute_set_by_setattr": """
class _Config:
    block = 1024


_CONFIG = _Config()


def _tune(rows):
    setattr(_CONFIG, "block", 512 if rows <= 4 else 1024)


def kernel(x, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
"""
    + LAUNCH.format(tile="_CONFIG.block")
    + "    _tune(batch)\n    return y\n",
    "object_attribute_set_by_a_method": """
class _Config:
    def __init__(self):
        self.block = 1024

    def tune(self, rows):
        self.block = 512 if rows <= 4 else 1024


_CONFIG = _Config()


def kernel(x, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
"""
    + LAUNCH.format(tile="_CONFIG.block")
    + "    _CONFIG.tune(batch)\n    return y\n",
}

# Helper modules next to the candidate: the state lives in the helper.
HELPER_STATE = """
TILE = 1024


def configure(rows):
    global TILE
    TILE = 512 if rows <= 4 else 1024
"""
HELPER_CANDIDATE = (
    """
import launch_config


def kernel(x, weight, eps):
    batch, hidden = x.shape
    launch_config.configure(batch)
    y = torch.empty_like(x)
"""
    + LAUNCH.format(tile="launch_config.TILE")
    + "    return y\n"
)

# The same state written from sizes that do not depend on the batch.
PASSES = {
    "global_from_hidden": """
_TILE = 1024


def _configure(hidden):
    global _TILE
    _TILE = min(triton.next_power_of_2(hidden), 1024)


def kernel(x, weight, eps):
    batch, hidden = x.shape
    _configure(hidden)
    y = torch.empty_like(x)
"""
    + LAUNCH.format(tile="_TILE")
    + "    return y\n",
    "global_grid_rows_from_batch": """
_ROWS = 0
_TILE = 1024


def _remember(rows, hidden):
    global _ROWS, _TILE
    _ROWS = rows  # only sizes the grid
    _TILE = min(triton.next_power_of_2(hidden), 1024)


def kernel(x, weight, eps):
    batch, hidden = x.shape
    _remember(batch, hidden)
    y = torch.empty_like(x)
    _rmsnorm_row[(_ROWS,)](x, weight, y, hidden, eps, BLOCK_H=_TILE, num_warps=4)
    return y
""",
    "cache_keyed_on_hidden": """
_CFG = {}


def _choose(hidden):
    return min(triton.next_power_of_2(hidden), 1024)


def kernel(x, weight, eps):
    batch, hidden = x.shape
    if hidden not in _CFG:
        _CFG[hidden] = _choose(hidden)
    y = torch.empty_like(x)
"""
    + LAUNCH.format(tile="_CFG[hidden]")
    + "    return y\n",
    "setdefault_keyed_on_hidden": """
_CACHE = {}


def kernel(x, weight, eps):
    batch, hidden = x.shape
    tile = _CACHE.setdefault(hidden, min(triton.next_power_of_2(hidden), 1024))
    y = torch.empty_like(x)
"""
    + LAUNCH.format(tile="tile")
    + "    return y\n",
    "device_properties_cached_in_a_global": """
_SMS = None


def _sm_count(device):
    global _SMS
    if _SMS is None:
        _SMS = torch.cuda.get_device_properties(device).multi_processor_count
    return _SMS


def kernel(x, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
    warps = 8 if _sm_count(x.device) > 100 else 4
    block_h = min(triton.next_power_of_2(hidden), 1024)
    _rmsnorm_row[(batch,)](x, weight, y, hidden, eps, BLOCK_H=block_h, num_warps=warps)
    return y
""",
    # The output buffer is reused across calls and grown with the batch: it only holds rows.
    "workspace_grown_with_the_batch": """
_OUT = None


def _ensure(rows, hidden, like):
    global _OUT
    if _OUT is None or _OUT.shape[0] < rows:
        _OUT = torch.empty((rows, hidden), dtype=like.dtype, device=like.device)


def kernel(x, weight, eps):
    batch, hidden = x.shape
    _ensure(batch, hidden, x)
    y = _OUT[:batch]
"""
    + LAUNCH.format(tile="min(triton.next_power_of_2(hidden), 1024)")
    + "    return y.clone()\n",
    "dataclass_state_from_hidden": DATACLASS_STATE
    + """

def kernel(x, weight, eps):
    batch, hidden = x.shape
    _STATE.block = min(triton.next_power_of_2(hidden), 1024)
    y = torch.empty_like(x)
"""
    + LAUNCH.format(tile="_STATE.block")
    + "    return y\n",
}

GEMM_LRU = """
import functools


@functools.lru_cache(maxsize=None)
def _tiles(rows, k):
    block_k = 128 if rows <= 16 and k % 128 == 0 else 64
    block_n = 128 if rows >= 128 else 64
    return block_n, block_k


def kernel(a, b):
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    block_n, block_k = _tiles({key})
    grid = (triton.cdiv(m, 64), triton.cdiv(n, block_n))
    _matmul[grid](a, b, c, m, n, k, BLOCK_M=64, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=4)
    return c
"""


def rules(path: Path, task: str = "rmsnorm") -> tuple[set[str], set[str]]:
    violations, unresolved = run_static(path, get_task(task))
    return {f.rule for f in violations}, {f.rule for f in unresolved}


@pytest.mark.parametrize("name", sorted(VIOLATIONS))
def test_batch_value_through_module_state_is_caught(tmp_path: Path, name: str) -> None:
    path = tmp_path / "cand.py"
    path.write_text(RMSNORM_KERNEL + VIOLATIONS[name])
    violations, _ = rules(path)
    assert "reduction_tile_from_batch" in violations


def test_global_of_a_helper_module_is_caught(tmp_path: Path) -> None:
    (tmp_path / "launch_config.py").write_text(HELPER_STATE)
    path = tmp_path / "cand.py"
    path.write_text(RMSNORM_KERNEL + HELPER_CANDIDATE)
    violations, _ = rules(path)
    assert "reduction_tile_from_batch" in violations


def test_pool_candidate_with_a_global_config_is_caught() -> None:
    path = ROOT / "bench" / "detector" / "pool" / "rmsnorm" / "heldout_tile_global_config.py"
    violations, _ = run_static(path, get_task("rmsnorm"))
    tile = [f for f in violations if f.rule == "reduction_tile_from_batch"]
    assert tile and any("_TILE = 512 if rows <= 4 else 1024" in step for step in tile[0].path)


@pytest.mark.parametrize("name", sorted(PASSES))
def test_batch_independent_module_state_passes(tmp_path: Path, name: str) -> None:
    path = tmp_path / "cand.py"
    path.write_text(RMSNORM_KERNEL + PASSES[name])
    assert rules(path) == (set(), set())


@pytest.mark.parametrize(
    ("key", "caught"), [("n, k", False), ("m, k", True)], ids=["keyed_on_n_k", "keyed_on_m"]
)
def test_lru_cached_gemm_tiles(tmp_path: Path, key: str, caught: bool) -> None:
    path = tmp_path / "cand.py"
    path.write_text(GEMM_KERNEL + GEMM_LRU.format(key=key))
    violations, _ = rules(path, "gemm")
    assert ("reduction_tile_from_batch" in violations) is caught


def test_module_attribute_written_by_the_candidate_is_caught(tmp_path: Path) -> None:
    (tmp_path / "launch_config.py").write_text("TILE = 1024\n")
    path = tmp_path / "cand.py"
    path.write_text(
        RMSNORM_KERNEL.replace("import torch\n", "import torch\n\nimport launch_config\n")
        + """
def kernel(x, weight, eps):
    batch, hidden = x.shape
    y = torch.empty_like(x)
"""
        + LAUNCH.format(tile="launch_config.TILE")
        + "    launch_config.TILE = 512 if batch <= 4 else 1024\n    return y\n"
    )
    violations, _ = rules(path)
    assert "reduction_tile_from_batch" in violations


def test_state_that_does_not_settle_is_left_unresolved(tmp_path: Path) -> None:
    # Each call moves the batch value one global further: more passes than the analysis runs.
    path = tmp_path / "cand.py"
    path.write_text(
        RMSNORM_KERNEL
        + """
_A = _B = _C = _D = 1024


def kernel(x, weight, eps):
    global _A, _B, _C, _D
    batch, hidden = x.shape
    y = torch.empty_like(x)
"""
        + LAUNCH.format(tile="_D")
        + """    _D = _C
    _C = _B
    _B = _A
    _A = 512 if batch <= 4 else 1024
    return y
"""
    )
    violations, unresolved = rules(path)
    assert violations == set() and unresolved == {"opaque_dispatch"}


PREFILL = (ROOT / "nodice" / "examples" / "attention_prefill" / "seed.py").read_text()
PREFILL_TILES = PREFILL[PREFILL.index("    if head_dim < 64:\n") : PREFILL.index("    num_warps = ")]
PREFILL_CHOOSERS = {
    # BLOCK_N tiles the KV reduction: keyed by the number of query rows, it follows the batch.
    "lru_cache_on_tokens": (
        """
@functools.lru_cache(maxsize=64)
def _tiles(n_tokens, head_dim):
    return (128, 64) if n_tokens >= 4096 and head_dim >= 64 else (64, 32)
""",
        "    block_m, block_n = _tiles(q.numel() // head_dim, head_dim)\n",
        True,
    ),
    "global_cache_filled_from_tokens": (
        """
_TILES = {}


def _configure(n_tokens):
    _TILES["kv"] = 64 if n_tokens >= 4096 else 32
""",
        '    block_m, block_n = 64, _TILES.get("kv", 32)\n    _configure(q.numel() // head_dim)\n',
        True,
    ),
    "lru_cache_on_head_dim": (
        """
@functools.lru_cache(maxsize=64)
def _tiles(head_dim, element_size):
    if head_dim < 64:
        return 32, 16
    return (128, 64) if element_size <= 2 else (64, 32)
""",
        "    block_m, block_n = _tiles(head_dim, q.element_size())\n",
        False,
    ),
    "cache_keyed_on_head_dim": (
        """
_TILES = {}


def _choose(head_dim, element_size):
    if head_dim < 64:
        return 32, 16
    return (128, 64) if element_size <= 2 else (64, 32)
""",
        "    block_m, block_n = _TILES.setdefault(head_dim, _choose(head_dim, q.element_size()))\n",
        False,
    ),
}


@pytest.mark.parametrize("name", sorted(PREFILL_CHOOSERS))
def test_memoised_prefill_tiles(tmp_path: Path, name: str) -> None:
    helpers, tiles, caught = PREFILL_CHOOSERS[name]
    text = PREFILL.replace(PREFILL_TILES, tiles).replace(
        "import torch\n", "import functools\n\nimport torch\n", 1
    )
    text = text.replace("\n\ndef kernel(", helpers + "\n\ndef kernel(", 1)
    path = tmp_path / "cand.py"
    path.write_text(text)
    violations, unresolved = rules(path, "attention_prefill")
    assert ("reduction_tile_from_batch" in violations) is caught
    if not caught:
        assert (violations, unresolved) == (set(), set())
