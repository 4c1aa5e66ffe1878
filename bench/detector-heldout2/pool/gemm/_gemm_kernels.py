"""Tiled Triton matmul kernels shared by the gemm candidates in this folder."""
import triton
import triton.language as tl


@triton.jit
def tile_mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    n_m = tl.cdiv(M, BM)
    n_n = tl.cdiv(N, BN)
    width = GROUP_M * n_n
    group = pid // width
    first_m = group * GROUP_M
    gsize = tl.minimum(n_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % gsize
    pid_n = (pid % width) // gsize
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def tile_mm_ksplit(a_ptr, b_ptr, p_ptr, M, N, K, K_PER, sam, sak, sbk, sbn,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Partial products over K range [pid_k*K_PER, (pid_k+1)*K_PER) into p[pid_k]."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    k_lo = pid_k * K_PER
    for k0 in range(0, K_PER, BK):
        kk = k_lo + k0 + rk
        km = (kk < K) & (kk < k_lo + K_PER)
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak,
                    mask=(rm[:, None] < M) & km[None, :], other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn,
                    mask=km[:, None] & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(p_ptr + pid_k * M * N + rm[:, None] * N + rn[None, :], acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def sum_partials(p_ptr, c_ptr, MN, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < MN
    acc = tl.load(p_ptr + offs, mask=m, other=0.0)
    for s in range(1, SPLIT):
        acc += tl.load(p_ptr + s * MN + offs, mask=m, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=m)
