"""Native code: .cu/.cpp files next to the candidate and sources embedded in Python strings."""

from __future__ import annotations

import textwrap
from pathlib import Path

from nodice.gate.static import run_static
from nodice.tasks import get_task

PY_LOADER = """
import torch
from torch.utils.cpp_extension import load

_ext = load(name="rownorm", sources=["{source}"])


def kernel(x, weight, eps):
    return _ext.forward(x, weight, eps)
"""

SPLIT_FROM_BATCH_CU = r"""
#include <torch/extension.h>

__global__ void partial_sumsq(const float* x, float* part, int hidden, int num_splits) {
    int row = blockIdx.x;
    int split = blockIdx.y;
    int chunk = (hidden + num_splits - 1) / num_splits;
    float acc = 0.f;
    for (int i = split * chunk + threadIdx.x; i < min(hidden, (split + 1) * chunk); i += blockDim.x) {
        acc += x[row * hidden + i] * x[row * hidden + i];
    }
    part[(row * num_splits + split) * blockDim.x + threadIdx.x] = acc;
}

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, double eps) {
    const int batch = x.size(0);
    const int hidden = x.size(1);
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    int num_splits = std::max(1, sms / batch);
    auto part = torch::empty({batch, num_splits, 256}, x.options());
    partial_sumsq<<<dim3(batch, num_splits), 256>>>(x.data_ptr<float>(), part.data_ptr<float>(), hidden,
                                                     num_splits);
    return part;
}
"""


def write(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path / "cand.py"


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_split_count_from_batch_and_sm_count_in_a_cu_file(tmp_path: Path) -> None:
    cand = write(
        tmp_path, {"cand.py": PY_LOADER.replace("{source}", "rownorm.cu"), "rownorm.cu": SPLIT_FROM_BATCH_CU}
    )
    violations, _ = run_static(cand, get_task("rmsnorm"))
    f = next(f for f in violations if f.rule == "native_split_count")
    assert (
        f.file.endswith("rownorm.cu") and f.protected == "NUM_SPLITS" and f.mechanism == "work_partitioning"
    )
    assert f.line == line_of(SPLIT_FROM_BATCH_CU, "int num_splits = std::max")
    assert any("x.size(0)" in step for step in f.path), f.path


def test_split_from_sm_count_alone_is_unresolved(tmp_path: Path) -> None:
    cu = SPLIT_FROM_BATCH_CU.replace("sms / batch", "sms / 4")
    cand = write(tmp_path, {"cand.py": PY_LOADER.replace("{source}", "rownorm.cu"), "rownorm.cu": cu})
    violations, unresolved = run_static(cand, get_task("rmsnorm"))
    assert not [f for f in violations if f.rule == "native_split_count"]
    assert any(f.rule == "native_split_from_sm_count" for f in unresolved)


EMBEDDED = '''
import torch
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void sumsq_atomic(const float* x, float* out, int hidden) {
    int row = blockIdx.x;
    float partial = 0.f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x)
        partial += x[row * hidden + i] * x[row * hidden + i];
    atomicAdd(&out[row], partial);
}
__global__ void count_rows(int* counter) {
    atomicAdd(counter, 1);
}
"""

_ext = load_inline(name="sumsq", cpp_sources="", cuda_sources=CUDA_SRC, functions=["sumsq"])


def kernel(x, weight, eps):
    return _ext.sumsq(x, weight, eps)
'''


def test_float_atomic_add_in_embedded_cuda(tmp_path: Path) -> None:
    cand = write(tmp_path, {"cand.py": EMBEDDED})
    violations, unresolved = run_static(cand, get_task("rmsnorm"))
    atomics = [f for f in violations if f.rule == "native_float_atomic"]
    assert len(atomics) == 1, [(f.rule, f.line) for f in violations]
    assert atomics[0].line == line_of(EMBEDDED, "atomicAdd(&out[row]")
    assert atomics[0].file.endswith("cand.py") and atomics[0].mechanism == "atomics"
    assert not [f for f in unresolved if f.rule == "atomic_add_unknown_dtype"]


DISPATCH_CU = r"""
template <int ROWS_PER_BLOCK>
__global__ void rmsnorm_rows(const float* x, const float* w, float* y, int hidden, int batch, float eps) {
    int row = blockIdx.x * ROWS_PER_BLOCK;
    if (row >= batch) return;
    float acc = 0.f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) acc += x[row * hidden + i] * x[row * hidden + i];
    y[row] = acc;
}

void launch(const float* x, const float* w, float* y, int batch, int hidden, float eps) {
    if (batch < 32) {
        rmsnorm_rows<1><<<batch, 128>>>(x, w, y, hidden, batch, eps);
    } else {
        rmsnorm_rows<4><<<(batch + 3) / 4, 512>>>(x, w, y, hidden, batch, eps);
    }
}
"""


def test_host_dispatch_on_batch_size(tmp_path: Path) -> None:
    cand = write(tmp_path, {"cand.py": PY_LOADER.replace("{source}", "rows.cu"), "rows.cu": DISPATCH_CU})
    violations, _ = run_static(cand, get_task("rmsnorm"))
    f = next(f for f in violations if f.rule == "native_batch_dispatch")
    assert f.mechanism == "algorithm_selection" and f.line == line_of(DISPATCH_CU, "if (batch < 32)")


# Elementwise kernels chosen by the batch: a float4 body and a scalar tail (the same formula), or an
# IEEE and an intrinsic version (``__expf``: other bits).
ELEMENTWISE_CU = r"""
__global__ void act_vec4(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
    for (long i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        float4 v = x[i];
        y[i] = make_float4(v.x / (1.f + {fabs}(v.x)), v.y / (1.f + {fabs}(v.y)),
                           v.z / (1.f + {fabs}(v.z)), v.w / (1.f + {fabs}(v.w)));
    }
}

__global__ void act_tail(const float* __restrict__ x, float* __restrict__ y, long start, long n) {
    long i = start + blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / (1.f + fabsf(x[i]));
}

void launch(const float* x, float* y, int batch, int hidden) {
    long n = (long)batch * hidden;
    long n4 = n / 4;
    if (n4 > 0) act_vec4<<<(n4 + 255) / 256, 256>>>((const float4*)x, (float4*)y, n4);
    long tail = n - n4 * 4;
    if (tail > 0) act_tail<<<1, 256>>>(x, y, n4 * 4, n);
}
"""


def test_a_choice_between_elementwise_kernels_is_left_to_dynamic_validation(tmp_path: Path) -> None:
    """Which elementwise kernel computes an element changes no bit when their formulas agree, which
    running both sides shows; with an approximate intrinsic on one side it does, statically."""
    source = ELEMENTWISE_CU.replace("{fabs}", "fabsf")
    cand = write(tmp_path, {"cand.py": PY_LOADER.replace("{source}", "act.cu"), "act.cu": source})
    violations, unresolved = run_static(cand, get_task("rmsnorm"))
    assert violations == []
    assert {f.rule for f in unresolved} == {"native_elementwise_dispatch"}
    assert {f.line for f in unresolved} == {line_of(source, "if (n4 > 0)"), line_of(source, "if (tail > 0)")}
    fast = (
        ELEMENTWISE_CU.replace("{fabs}", "fabsf")
        .replace("x[i] / (1.f", "__fdividef(x[i], 1.f")
        .replace("fabsf(x[i]));", "fabsf(x[i])));")
    )
    cand = write(tmp_path, {"cand.py": PY_LOADER.replace("{source}", "act.cu"), "act.cu": fast})
    violations, _ = run_static(cand, get_task("rmsnorm"))
    assert {f.rule for f in violations} == {"native_batch_dispatch"}


def test_grid_strided_reduction_and_harmless_row_loop(tmp_path: Path) -> None:
    cu = r"""
    __global__ void sum_grid(const float* x, float* partial, int n) {
        float acc = 0.f;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
            acc += x[i];
        }
        partial[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    }

    __global__ void rows(const float* x, float* y, int batch, int hidden) {
        for (int row = blockIdx.x; row < batch; row += gridDim.x) {
            float acc = 0.f;
            for (int i = threadIdx.x; i < hidden; i += blockDim.x) acc += x[row * hidden + i];
            y[row] = acc;
        }
    }
    """
    cand = write(tmp_path, {"cand.py": PY_LOADER.replace("{source}", "grid.cu"), "grid.cu": cu})
    violations, _ = run_static(cand, get_task("rmsnorm"))
    hits = [f for f in violations if f.rule == "native_grid_partitioned_reduction"]
    assert len(hits) == 1 and hits[0].line == line_of(textwrap.dedent(cu), "i += gridDim.x * blockDim.x")


def test_native_file_sharing_the_candidate_stem_is_read(tmp_path: Path) -> None:
    py = PY_LOADER.replace('sources=["{source}"]', "sources=[__file__.replace('.py', '.cu')]")
    cand = write(tmp_path, {"cand.py": py, "cand.cu": SPLIT_FROM_BATCH_CU, "other.cu": DISPATCH_CU})
    violations, _ = run_static(cand, get_task("rmsnorm"))
    assert {f.file.rsplit("/", 1)[-1] for f in violations} == {"cand.cu"}


def test_clean_native_kernel_passes(tmp_path: Path) -> None:
    cu = r"""
    __global__ void rmsnorm_row(const float* x, const float* w, float* y, int hidden, float eps) {
        int row = blockIdx.x;
        __shared__ float red[256];
        float acc = 0.f;
        for (int i = threadIdx.x; i < hidden; i += 256) acc += x[row * hidden + i] * x[row * hidden + i];
        red[threadIdx.x] = acc;
        __syncthreads();
        for (int s = 128; s > 0; s >>= 1) {
            if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
            __syncthreads();
        }
        float rstd = rsqrtf(red[0] / hidden + eps);
        for (int i = threadIdx.x; i < hidden; i += 256)
            y[row * hidden + i] = x[row * hidden + i] * rstd * w[i];
    }

    void launch(const float* x, const float* w, float* y, int batch, int hidden, float eps) {
        if (batch == 0) return;
        rmsnorm_row<<<batch, 256>>>(x, w, y, hidden, eps);
    }
    """
    cand = write(tmp_path, {"cand.py": PY_LOADER.replace("{source}", "ok.cu"), "ok.cu": cu})
    violations, unresolved = run_static(cand, get_task("rmsnorm"))
    assert violations == [] and unresolved == []


RELU_CUDA = '''
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

SOURCE = """
#include <torch/extension.h>

__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    relu_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""

ext = load_inline(name="relu_ext", cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);",
                  cuda_sources=SOURCE, functions=["relu_cuda"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_cuda(x)
'''

RELU_REF = """
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
"""


def _write(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


def test_native_cuda_on_cpu_is_analysed_and_says_what_needs_a_gpu(tmp_path: Path) -> None:
    """KernelBench's CUDA backend on a machine without a GPU: static analysis runs, nothing is built,
    and the line says dynamic validation needs a CUDA device."""
    from nodice.gate.pipeline import check
    from nodice.gate.static.project import cuda_code
    from nodice.references import reference_task_name

    cand = _write(tmp_path, "relu_cuda.py", RELU_CUDA)
    ref = _write(tmp_path, "relu.py", RELU_REF)
    assert cuda_code(cand) == "relu_cuda.py:8"  # the kernel's first CUDA mark, in the file's lines
    r = check(cand, reference_task_name(ref), device="cpu", entry="ModelNew", seed=0)
    assert r.verdict == "error" and r.exit_code == 2
    assert r.stage("static").verdict == "pass" and r.stage("load") is None  # never built nor imported
    assert r.error == (
        "device unavailable: relu_cuda.py:8: native CUDA code runs on a CUDA device only (static analysis "
        "found no BI violation); correctness and dynamic validation need --device cuda"
    )
    # C++ for the host is not CUDA: it runs here like any other candidate.
    host = _write(
        tmp_path, "host.py", 'SOURCE = """\n#include <torch/extension.h>\nint f(int x) { return x; }\n"""\n'
    )
    assert cuda_code(host) is None
