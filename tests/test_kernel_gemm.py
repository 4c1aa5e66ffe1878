"""The bundled GEMM (nodice/kernels/gemm.py) on CPU, under Triton's interpreter: the pointer-load
path its ``SINGLE_POINTER_LOADS`` pin gives to one request's step (M ≤ 16) computes the TMA path's
bits, and with the pin on a row is the same alone and inside batches on both sides of the edge."""

from __future__ import annotations

from types import ModuleType

import pytest
import torch

from tests.conftest import ROOT, load_kernel

CPU = torch.device("cpu")
BUNDLED = ROOT / "nodice" / "kernels" / "gemm.py"


def _load(pointer_loads: int) -> ModuleType:
    mod = load_kernel(BUNDLED, f"gemm_pointer_{pointer_loads}")
    mod.SINGLE_POINTER_LOADS = pointer_loads
    return mod


@pytest.fixture(scope="module")
def both() -> tuple[ModuleType, ModuleType]:
    return _load(0), _load(1)


def _operands(m: int, k: int, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn((m, k), generator=gen), torch.randn((k, n), generator=gen)


def test_the_pin_is_on_and_picks_the_widest_tile_with_enough_columns(both) -> None:
    off, on = both
    assert BUNDLED.read_text().count("\nSINGLE_POINTER_LOADS = 1\n") == 1  # shipped on
    assert not off._pointer_loads(1)
    assert on._pointer_loads(16) and not on._pointer_loads(17)
    sms = 132
    # (N, expected BLOCK_N): 80 column tiles at least, the widest of 128, 64, 32.
    for n, block_n in [(28672, 128), (10240, 128), (6144, 64), (5120, 64), (4096, 32), (512, 32)]:
        assert on._tile(1, n, sms)[1] == block_n, n
        assert on._tile(1, n, sms)[0] == 64  # a warp-group MMA tile, as at every other M
    assert on._tile(17, 4096, sms) == off._tile(17, 4096, sms)  # past the edge nothing changes


@pytest.mark.parametrize("m", [1, 3, 16])
@pytest.mark.parametrize(("k", "n"), [(160, 96), (64, 200)])
def test_pointer_loads_compute_the_tma_paths_bits(both, m: int, k: int, n: int) -> None:
    off, on = both
    a, b = _operands(m, k, n, m * 1000 + n)
    want = a @ b
    assert off._tma_ok(a, b, torch.empty((m, n)))  # the comparison is against the TMA path
    tma, pointer = off.kernel(a, b), on.kernel(a, b)
    torch.testing.assert_close(tma, want, rtol=1e-5, atol=1e-4)
    assert torch.equal(pointer.view(torch.int32), tma.view(torch.int32))


def test_a_row_alone_and_in_batches_across_the_edge(both) -> None:
    _, on = both
    a, b = _operands(40, 192, 160, 7)
    alone = on.kernel(a[:1], b)
    for m in (2, 15, 16, 17, 33, 40):
        batch = a[:m].clone()
        for slot in sorted({0, m // 2, m - 1}):
            batch[slot] = a[0]
            row = on.kernel(batch, b)[slot]
            assert torch.equal(row.view(torch.int32), alone[0].view(torch.int32)), (m, slot)
            batch[slot] = a[slot]


def _chained_module(seg_k: int) -> ModuleType:
    mod = _load(0)
    mod.CHAINED_SPLITS, mod.CHAINED_SEG_K = 1, seg_k
    return mod


@pytest.mark.parametrize(
    ("m", "k", "n", "seg_k"), [(65, 256, 96, 64), (130, 320, 200, 128), (300, 192, 64, 64)]
)
def test_chained_segments_compute_the_one_program_bits(both, m: int, k: int, n: int, seg_k: int) -> None:
    off, _ = both
    chained = _chained_module(seg_k)
    assert chained._segments(k) > 1
    assert chained._compute_tile(m, n, chained._segments(k), chained.SMS)[5] > 1  # it does chain here
    a, b = _operands(m, k, n, m + k + n)
    whole, parts = off.kernel(a, b), chained.kernel(a, b)
    torch.testing.assert_close(whole, a @ b, rtol=1e-5, atol=1e-4)
    assert torch.equal(parts.view(torch.int32), whole.view(torch.int32))


def test_the_chain_is_off_and_follows_k_alone() -> None:
    assert BUNDLED.read_text().count("\nCHAINED_SPLITS = 0\n") == 1  # shipped off
    chained = _chained_module(2048)
    assert [chained._segments(k) for k in (2048, 4096, 5120, 25600)] == [1, 2, 3, 13]
    # Qwen3-32B down at M = 512 (80 wide tiles for 132 SMs) chains its 13 segments; at M = 4096 the
    # tiles already fill the waves and it does not.
    assert chained._compute_tile(512, 5120, 13, 132)[5] == 13
    assert chained._compute_tile(4096, 4096, 7, 132)[5] == 1


def test_the_chained_chooser_decides_as_the_tile_rule_with_one_segment(both) -> None:
    # ``_tile``'s rule: the narrow tile when its waves × area is below the wide tile's times the
    # narrow tile's relative efficiency; ``_compute_tile`` must agree with it when it may not chain.
    off, _ = both

    def before(m: int, n: int, sms: int) -> int:
        wide = -(-(-(-m // 128) * -(-n // 256)) // sms) * 128 * 256
        narrow = -(-(-(-m // 128) * -(-n // 128)) // sms) * 128 * 128
        return 128 if narrow * 100 < wide * off.NARROW_EFFICIENCY_PERCENT else 256

    for m in (65, 128, 500, 512, 513, 1000, 4096, 16384):
        for n in (1024, 4096, 5120, 6144, 10240, 24576, 28672):
            for sms in (114, 132):
                assert off._tile(m, n, sms)[1] == before(m, n, sms), (m, n, sms)
                assert off._compute_tile(m, n, 1, sms)[:5] == off._tile(m, n, sms), (m, n, sms)


def _narrow_module(narrowest_min_tiles: int = 256, decode_pointer_loads: int = 0) -> ModuleType:
    mod = _load(1)
    mod.SINGLE_PTR_NARROWEST_MIN_TILES = narrowest_min_tiles
    mod.DECODE_POINTER_LOADS = decode_pointer_loads
    return mod


def test_the_narrow_and_decode_pointer_pins_are_off_and_follow_n_alone(both) -> None:
    text = BUNDLED.read_text()
    assert text.count("\nSINGLE_PTR_NARROWEST_MIN_TILES = 0\n") == 1  # shipped off
    assert text.count("\nDECODE_POINTER_LOADS = 0\n") == 1
    _, on = both
    assert not on._pointer_loads(17)
    narrow = _narrow_module(256)
    # 16 columns only where 32 leave fewer than 256 tiles; the wider rules decide first, as before.
    for n, block_n in [(28672, 128), (10240, 128), (6144, 64), (5120, 64), (4096, 16), (16384, 128)]:
        assert narrow._tile(1, n, 132)[1] == block_n, n
        assert narrow._tile(16, n, 132) == narrow._tile(1, n, 132)  # the rows never choose
    # Qwen3-32B down (N = 5120) keeps 80 tiles of 64 unless the wider rules ask for more tiles too.
    narrow.SINGLE_PTR_MIN_TILES = 256
    assert [narrow._tile(1, n, 132)[1] for n in (28672, 10240, 5120)] == [64, 32, 16]
    assert narrow._tile(17, 4096, 132) == on._tile(17, 4096, 132)
    decode = _narrow_module(0, 1)
    assert decode._pointer_loads(64) and not decode._pointer_loads(65)
    assert decode._tile(64, 4096, 132) == decode._tile(1, 4096, 132) == (64, 32, 8, 4, 8)
    assert decode._tile(65, 4096, 132) == on._tile(65, 4096, 132)


@pytest.mark.parametrize("m", [1, 16])
@pytest.mark.parametrize(("k", "n"), [(160, 96), (256, 40)])
def test_sixteen_column_tiles_compute_the_tma_paths_bits(both, m: int, k: int, n: int) -> None:
    off, _ = both
    narrow = _narrow_module(256)
    assert narrow._tile(m, n, 132)[1] == 16
    a, b = _operands(m, k, n, 31 * m + n)
    tma, pointer = off.kernel(a, b), narrow.kernel(a, b)
    torch.testing.assert_close(tma, a @ b, rtol=1e-5, atol=1e-4)
    assert torch.equal(pointer.view(torch.int32), tma.view(torch.int32))


@pytest.mark.parametrize("m", [17, 40, 64])
def test_decode_batches_through_pointer_loads_compute_the_tma_paths_bits(both, m: int) -> None:
    off, _ = both
    decode = _narrow_module(256, 1)
    a, b = _operands(m, 192, 72, m)
    tma, pointer = off.kernel(a, b), decode.kernel(a, b)
    torch.testing.assert_close(tma, a @ b, rtol=1e-5, atol=1e-4)
    assert torch.equal(pointer.view(torch.int32), tma.view(torch.int32))


def test_with_both_pins_on_a_row_is_the_same_alone_and_across_both_edges() -> None:
    decode = _narrow_module(256, 1)
    a, b = _operands(80, 128, 48, 11)
    alone = decode.kernel(a[:1], b)
    for m in (2, 16, 17, 64, 65, 80):
        batch = a[:m].clone()
        for slot in sorted({0, m - 1}):
            batch[slot] = a[0]
            row = decode.kernel(batch, b)[slot]
            assert torch.equal(row.view(torch.int32), alone[0].view(torch.int32)), (m, slot)
            batch[slot] = a[slot]


def _split_module(seg_k: int) -> ModuleType:
    mod = _load(1)
    mod.SPLIT_K, mod.SPLIT_SEG_K = 1, seg_k
    return mod


def test_split_k_is_off_and_its_segments_follow_k_alone() -> None:
    assert BUNDLED.read_text().count("\nSPLIT_K = 0\n") == 1  # shipped off
    split = _split_module(2048)
    assert [split._split_segments(k) for k in (2048, 4096, 5120, 14336)] == [1, 2, 3, 7]
    assert _load(1)._split_segments(14336) == 1


@pytest.mark.parametrize(("k", "n", "seg_k"), [(320, 96, 128), (256, 200, 64)])
def test_split_k_segments_give_a_row_the_same_bits_at_every_m(k: int, n: int, seg_k: int) -> None:
    """Up to SPLIT_MAX_M rows each segment is its own program and a second kernel adds the sums;
    above, one program adds them. A row alone, in small batches (both load paths) and in large
    ones (TMA, one program per tile) has the same bits; the sum is the product's."""
    split = _split_module(seg_k)
    assert split._split_segments(k) > 1
    a, b = _operands(split.SPLIT_MAX_M + 40, k, n, k + n)
    alone = split.kernel(a[:1], b)
    torch.testing.assert_close(alone, a[:1] @ b, rtol=1e-5, atol=1e-4)
    assert split._tma_ok(a, b, torch.empty((a.shape[0], n)))  # large batches take the TMA kernel
    for m in (1, 16, 17, split.SPLIT_MAX_M, split.SPLIT_MAX_M + 1, split.SPLIT_MAX_M + 40):
        batch = a[:m].clone()
        slot = m // 2
        batch[slot] = a[0]
        out = split.kernel(batch, b)
        torch.testing.assert_close(out, batch @ b, rtol=1e-5, atol=1e-4)
        assert torch.equal(out[slot].view(torch.int32), alone[0].view(torch.int32)), m


def _mid_module(block_n: int = 128, efficiency: int = 80) -> ModuleType:
    mod = _load(1)
    mod.MID_TILES, mod.MID_BLOCK_N, mod.MID_EFFICIENCY_PERCENT = 1, block_n, efficiency
    return mod


def test_the_mid_tile_is_off_and_enters_the_wave_rule(both) -> None:
    assert BUNDLED.read_text().count("\nMID_TILES = 0\n") == 1  # shipped off
    _, on = both
    mid = _mid_module()
    # Qwen3-32B down at M = 512: 80 wide tiles leave 52 of 132 SMs idle; 320 tiles of 64 × 128 run
    # in three waves of a quarter of the work each, 30720 against 32768 at 80 % of the wide tile's
    # efficiency.
    assert mid._tile(512, 5120, 132) == (64, 128, 8, 4, mid.MID_STAGES)
    assert _mid_module(efficiency=60)._tile(512, 5120, 132) == on._tile(512, 5120, 132)
    # Where the waves are full it changes nothing; decode sizes keep their own rules.
    for m, n in [(4096, 4096), (16384, 5120), (512, 28672), (1, 5120), (64, 6144)]:
        assert mid._tile(m, n, 132) == on._tile(m, n, 132), (m, n)
    # The chained chooser sees the same three tiles.
    assert mid._compute_tile(512, 5120, 1, 132)[:5] == mid._tile(512, 5120, 132)


@pytest.mark.parametrize(("m", "k", "n"), [(130, 192, 200), (300, 128, 64)])
def test_the_mid_tile_computes_the_wide_tiles_bits(both, m: int, k: int, n: int) -> None:
    _, on = both
    mid = _mid_module()
    assert mid._tile(m, n, mid.SMS)[0] == 64 and on._tile(m, n, on.SMS)[0] == 128
    a, b = _operands(m, k, n, m * 7 + n)
    wide, small = on.kernel(a, b), mid.kernel(a, b)
    torch.testing.assert_close(wide, a @ b, rtol=1e-5, atol=1e-4)
    assert torch.equal(small.view(torch.int32), wide.view(torch.int32))
