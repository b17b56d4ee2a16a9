#!/usr/bin/env bash
# Sourced by scripts/venv.sh and scripts/docs.sh with $venv set (the virtualenv to install into): defines
# $installer (uv or pip), $install_command (the installer, into $venv), $rebuild_local (what makes it rebuild
# the checkout's two local packages) and install_newest.
# The installer is uv (astral-sh/uv, the version below): it resolves, unpacks, links and compiles bytecode in
# parallel. Measured here (November 2026, 2 cores, caches warm), the test virtualenv: 81 s with uv, 187 s with
# pip (165 CPU-s in pip itself, most of them compiling every module of pyspark, pandas and the rest one by one).
# uv is kept in a folder of its own in ~/.cache (pip puts it there once), never in the virtualenv, which holds
# only what was asked for. Where it
# cannot be installed (no wheel for the platform, no index) pip installs, as KAFKA_GROUP_INSTALLER=pip asks.
# uv rebuilds the two local packages every time (--reinstall-package: it would otherwise reuse a wheel it built
# before from a tree whose setup.py did not change).
uv_version=0.13.9
uv_home="${XDG_CACHE_HOME:-$HOME/.cache}/pyspark-kafka-group/uv-$uv_version"
if [ "${KAFKA_GROUP_INSTALLER:-uv}" = uv ] && [ ! -x "$uv_home/bin/uv" ]; then
  mkdir -p "$(dirname "$uv_home")"
  flock -o "$uv_home.lock" bash -c '[ -x "$1/bin/uv" ] && exit; rm -rf "$1.part" &&
    "$2" -m pip install --quiet --disable-pip-version-check --target "$1.part" "uv==$3" && mv "$1.part" "$1"' \
    _ "$uv_home" "$venv/bin/python" "$uv_version" ||
    echo "scripts/installer.sh: could not install uv $uv_version into $uv_home: pip installs instead" >&2
fi
# uv reads neither pip's configuration files nor its PIP_* variables: where they name package sources (an index, a
# mirror, no index) pip installs, so that both never see different packages. pip's find-links folders and CA file
# are handed to uv (UV_FIND_LINKS, SSL_CERT_FILE).
pip_names_sources() {
  [ -n "${PIP_INDEX_URL:-}${PIP_EXTRA_INDEX_URL:-}${PIP_NO_INDEX:-}" ] && return 0
  "$venv/bin/python" -m pip config list 2> /dev/null | grep -v '^:env:' |
    grep -qE '\.(index-url|extra-index-url|find-links|no-index)='
}
if [ "${KAFKA_GROUP_INSTALLER:-uv}" = uv ] && [ -x "$uv_home/bin/uv" ] && ! pip_names_sources; then
  installer=uv
  install_command=(env)
  find_links="${PIP_FIND_LINKS:-}"  # pip separates them with spaces, uv with commas
  if [ -n "$find_links" ]; then install_command+=("UV_FIND_LINKS=${find_links// /,}"); fi
  cert="${SSL_CERT_FILE:-${PIP_CERT:-}}"
  if [ -n "$cert" ]; then install_command+=("SSL_CERT_FILE=$cert"); fi
  # --compile-bytecode: pip's default, not uv's. Where PYTHONDONTWRITEBYTECODE is set (CI machines set it) Python
  # never writes a .pyc, so without it every process compiles all it imports, every time: CI's suite took 3529 s
  # instead of 2844 and Spark Connect's Python workers missed Spark's 10-s connect-back (November 2026).
  install_command+=("$uv_home/bin/uv" pip install --quiet --compile-bytecode --python "$venv/bin/python")
  rebuild_local=(--reinstall-package pyspark-kafka-group --reinstall-package kafka-group-devbroker)
else
  installer=pip
  install_command=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
  rebuild_local=()  # pip always rebuilds a local folder
fi
install_newest() {  # install_newest <name> <requirement>: the newest <name> it allows, the rest moved only as needed
  if [ "$installer" = uv ]; then "${install_command[@]}" --upgrade-package "$1" "$2"
  else "${install_command[@]}" --upgrade "$2"; fi
}
