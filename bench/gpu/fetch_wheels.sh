#!/usr/bin/env bash
# Recreate the baseline wheels for the GPU machine (Python 3.12, x86-64, torch 2.11 + CUDA 13) from PyPI.
#
# Usage (from the repository root, on a machine with PyPI access):
#   bench/gpu/fetch_wheels.sh          # .whl/: FlashInfer, apache-tvm-ffi, Liger, fla, sgemm-bi (~24 MB)
#   bench/gpu/fetch_wheels.sh --search # also .whl-search/: Optuna and its dependencies (~6 MB)
#   bench/gpu/fetch_wheels.sh --fa4    # also .whl-fa4/: flash-attn-4, quack and their CuTe DSL (~97 MB, two carries)
#   bench/gpu/fetch_wheels.sh --fib    # also .whl-fib/: flashinfer-bench and what it imports beyond the image (~3.5 MB)
# What each file is for, and how the GPU machine installs them: bench/gpu/WHEELS.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}

BASE=(
  flashinfer-python==0.6.18.post1
  apache-tvm-ffi==0.1.15.post2
  liger-kernel==0.8.5
  fla-core==0.6.0
  sgemm-bi==0.1.2
)
FA4=(
  flash-attn-4==4.0.0b36
  nvidia-cutlass-dsl==4.8.1
  nvidia-cutlass-dsl-libs-base==4.8.1
  nvidia-cutlass-dsl-libs-core==4.8.1
  nvidia-cutlass-dsl-libs-cu13==4.8.1
  quack-kernels==0.6.5
  protobuf==7.36.2
)
SEARCH=(
  optuna==5.0.0
  alembic==1.20.1
  colorlog==6.12.0
  mako==1.4.3
  markupsafe==3.0.4
  pyyaml==6.0.4
  sqlalchemy==2.1.9
)
# flashinfer-bench for its CUDA solutions (lab/scripts/gpu_native.sh); FlashInfer and apache-tvm-ffi
# come from .whl/ when a call needs them.
FIB=(
  flashinfer-bench==0.1.2
  docstring-parser==0.18.0
  pydantic==2.14.4
  pydantic-core==2.50.5
  annotated-types==0.8.0
  typing-inspection==0.4.5
  safetensors==0.8.0
)
# The CuTe DSL's compiled MLIR is one 92 MB wheel, more than one call carries: it travels in two parts.
SPLIT_WHEEL=nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl
FIRST_PART_BYTES=$((36 << 20))

download() {
  local dir=$1
  shift
  "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dir" "$@"
}

rm -rf .whl && mkdir -p .whl
download .whl "${BASE[@]}"

if [[ ${1:-} == --search ]]; then
  # Optuna for `nodice evolve --agent knobs` (lab/scripts/knob_search.sh); numpy, packaging, tqdm and
  # typing-extensions are on the image already.
  rm -rf .whl-search && mkdir -p .whl-search
  download .whl-search "${SEARCH[@]}"
fi

if [[ ${1:-} == --fib ]]; then
  rm -rf .whl-fib && mkdir -p .whl-fib
  download .whl-fib "${FIB[@]}"
fi

if [[ ${1:-} == --fa4 ]]; then
  rm -rf .whl-fa4 && mkdir -p .whl-fa4/1 .whl-fa4/2
  download .whl-fa4/2 "${FA4[@]}"
  (cd .whl-fa4/2 && sha256sum "$SPLIT_WHEEL" >SHA256SUMS)
  head -c "$FIRST_PART_BYTES" ".whl-fa4/2/$SPLIT_WHEEL" >".whl-fa4/1/$SPLIT_WHEEL.part1"
  tail -c +"$((FIRST_PART_BYTES + 1))" ".whl-fa4/2/$SPLIT_WHEEL" >".whl-fa4/2/$SPLIT_WHEEL.part2"
  rm ".whl-fa4/2/$SPLIT_WHEEL"
fi

du -b .whl/* .whl-fa4/*/* .whl-search/* .whl-fib/* 2>/dev/null | awk '{printf "%10.2f MiB  %s\n", $1 / 1048576, $2}'
for dir in .whl .whl-fa4/1 .whl-fa4/2 .whl-search .whl-fib; do
  [[ -d $dir ]] && du -sb "$dir" | awk '{printf "%10.2f MiB  %s (total)\n", $1 / 1048576, $2}'
done
