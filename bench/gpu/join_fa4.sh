#!/usr/bin/env bash
# On the GPU machine: put flash-attn-4's wheels back together from the two carried parts (bench/gpu/WHEELS.md).
#
#   bench/gpu/join_fa4.sh stage   # call 1 (carries .whl-fa4/1): keep part 1 outside the working tree
#   bench/gpu/join_fa4.sh join    # call 2, same warm machine (carries .whl-fa4/2): join, check, and
#                                 # leave every flash-attn-4 wheel in .whl-fa4/, where installs look
set -euo pipefail
cd "$(dirname "$0")/../.."
STAGE=${NODICE_FA4_STAGE:-/tmp/nodice-fa4}

case ${1:-} in
  stage)
    mkdir -p "$STAGE"
    cp .whl-fa4/1/*.part1 "$STAGE"/
    ;;
  join)
    part2=$(ls .whl-fa4/2/*.part2)
    wheel=$(basename "$part2" .part2)
    cat "$STAGE/$wheel.part1" "$part2" >".whl-fa4/$wheel"
    (cd .whl-fa4/2 && sed "s|  |  ../|" SHA256SUMS | sha256sum -c --quiet)
    cp .whl-fa4/2/*.whl .whl-fa4/
    ls -l .whl-fa4/*.whl
    ;;
  *)
    echo "usage: $0 stage|join" >&2
    exit 2
    ;;
esac
