# Sourced by the GPU scripts (from the repository root): install the carried wheels (.whl/, .whl-search/
# and .whl-fa4/ once joined; bench/gpu/WHEELS.md) into a private folder, and put the repository and
# that folder on PYTHONPATH. NODICE_SITE names the folder (default /tmp/nodice-site); library JIT
# caches go outside the working tree, so one call's compiled kernels serve the next on a warm machine
# (FlashInfer's builds take file locks, so processes side by side can share them).
site=${NODICE_SITE:-/tmp/nodice-site}
for dir in .whl .whl-fa4 .whl-search; do
  if compgen -G "$dir/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$dir"/*.whl \
      || echo "$(basename "$0"): installing $dir failed; its baselines will be reported missing" >&2
  fi
done
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}:$site"
export FLASHINFER_WORKSPACE_BASE=${FLASHINFER_WORKSPACE_BASE:-/tmp/nodice-jit}
