#!/usr/bin/env bash
# The device's carry folders, rebuilt on a fresh checkout (the lent GPU has no registry; what travels is <= 64 MiB):
#   .whl        ../shared/device/prepare.sh's wheels + dask, dask-cuda (labkit[cluster]), env.sh
#   .whl-extra  cryptography, cffi, pycparser (labkit serve's TLS key), cuda-bench (nvbench, the reconcile)
#   .whl-plotly plotly (explorer-latency, nsight-summary): carry it instead of .whl-extra
# Left out (size): jedi, parso, debugpy, widgetsnbextension; jinja2, markupsafe, fsspec come with torch there.
# From the project root:  bash results/device/prepare-carry.sh
set -euo pipefail
bash ../shared/device/prepare.sh dask distributed dask-cuda tblib zict locket partd cloudpickle toolz msgpack \
  sortedcontainers pyyaml click psutil pynvml nvidia-ml-py packaging
mkdir -p .whl-extra .whl-plotly /tmp/whl-aside
mv .whl/plotly-*.whl .whl-plotly/
mv .whl/jedi-* .whl/parso-* .whl/debugpy-* .whl/widgetsnbextension-* /tmp/whl-aside/ 2>/dev/null || true
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl-extra cryptography cffi pycparser cuda-bench==0.3.0
exclude=$(git rev-parse --git-path info/exclude)
for d in /.whl-extra/ /.whl-plotly/; do grep -qx "$d" "$exclude" || echo "$d" >> "$exclude"; done
# env.sh installs the extra folders too, whichever were carried
sed -i 's#--target /tmp/site .whl/\*.whl#--target /tmp/site .whl/*.whl $(ls .whl-extra/*.whl .whl-plotly/*.whl 2>/dev/null)#' .whl/env.sh
cp results/device/*.sh .whl/ && rm -f .whl/prepare-carry.sh
du -sh .whl .whl-extra .whl-plotly
