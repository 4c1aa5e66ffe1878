#!/usr/bin/env bash
# Wheels larger than one device call carries, sent in several calls to one warm machine.
#
#   bench/gpu/chunks.sh pack NAME MIB FILE...   # here: FILEs (of one folder) as one tar, cut into MIB-MiB parts,
#                                               # .whl-chunks/NAME/1/, …/2/, … (one folder per call)
#   bench/gpu/chunks.sh stage                   # there, each call carrying one folder: keep its
#                                               # parts outside the working tree
#   bench/gpu/chunks.sh unpack NAME DIR         # there, once every part is staged: check, untar to DIR
# A call carries the working tree too (every tracked file), so MIB is what is left of the carry
# limit after the tree: bench/gpu/WHEELS.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
STAGE=${NODICE_CHUNK_STAGE:-/tmp/nodice-chunks}

case ${1:-} in
  pack)
    name=$2 mib=$3
    shift 3
    rm -rf ".whl-chunks/$name" && mkdir -p ".whl-chunks/$name"
    # FILEs of one folder
    tar -cf ".whl-chunks/$name/all.tar" -C "$(dirname "$1")" $(for f in "$@"; do basename "$f"; done)
    (cd ".whl-chunks/$name" && sha256sum all.tar >SHA256SUMS && split -b "${mib}M" -d -a 2 all.tar "$name.part.")
    i=1
    for part in ".whl-chunks/$name/$name.part."*; do
      mkdir -p ".whl-chunks/$name/$i" && mv "$part" ".whl-chunks/$name/$i/"
      i=$((i + 1))
    done
    mv ".whl-chunks/$name/SHA256SUMS" ".whl-chunks/$name/1/"
    rm ".whl-chunks/$name/all.tar"
    du -sb ".whl-chunks/$name"/* | awk '{printf "%10.2f MiB  %s\n", $1 / 1048576, $2}'
    ;;
  stage)
    mkdir -p "$STAGE"
    find .whl-chunks -type f -exec cp {} "$STAGE"/ \;
    ls -l "$STAGE"
    ;;
  unpack)
    name=$2 dir=$3
    mkdir -p "$dir"
    cat "$STAGE/$name.part."* >"$STAGE/all.tar"
    (cd "$STAGE" && sha256sum -c --quiet SHA256SUMS)
    tar -xf "$STAGE/all.tar" -C "$dir"
    rm "$STAGE/all.tar"
    ls -l "$dir"
    ;;
  *)
    echo "usage: $0 pack NAME MIB FILE... | stage | unpack NAME DIR" >&2
    exit 2
    ;;
esac
