#!/usr/bin/env bash
# alloclab setup: installs whatever is missing, builds the driver, then
#   ./setup.sh demo [alloclab run flags...]   runs the default study (quick kv-allocators) in what is
#                                             left of ten minutes; it builds only what that study needs
#                                             (the rest is built on first use, or by ./setup.sh test)
#   ./setup.sh test [pytest args...]          runs every test (sets up the MariaDB 11.8 stack first)
#   ./setup.sh stack                          also sets up the studies' stack (MariaDB 11.8 + TideSQL)
#   ./setup.sh                                only installs
# Works on a fresh Debian 12 / Ubuntu as root or with sudo. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)
MODE=${1:-install}
[ $# -gt 0 ] && shift

say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }
case "$MODE" in install|demo|test|stack) ;; *) say "unknown mode '$MODE': use demo, test, stack or nothing"; exit 2 ;; esac

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    say "not root and no sudo: install the packages below by hand, then run again"; fi
fi

# --- system packages ------------------------------------------------------------------
# the driver's build and the default study's (demo) ...
APT_PKGS=(build-essential cmake pkg-config clang libclang-dev librocksdb-dev liblz4-dev libzstd-dev
          libmariadb-dev libpq-dev python3 python3-venv python3-pip binutils curl ca-certificates git procps
          linux-perf)
# ... and the servers', sysbench's, HammerDB's and the stack's
[ "$MODE" = demo ] || APT_PKGS+=(debootstrap mariadb-server mariadb-client mariadb-plugin-rocksdb postgresql
                                 sysbench tcl8.6 tcl8.6-dev tcl-thread libsqlite3-tcl)
# the allocators' packages (and the -dev ones of the link-time builds) are the catalog's
# (src/alloclab/catalog/allocators.py): read with the system's Python, installed first if missing
catalog() { python3 -c "import sys; sys.path.insert(0, 'src'); from alloclab.catalog import allocators as c; $1"; }
if ! command -v python3 >/dev/null 2>&1; then
  say "installing python3 (to read the allocator catalog)"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq python3 >/dev/null
fi
read -r -a ALLOC_PKGS <<< "$(catalog 'print(" ".join(c.debian_packages()))')"
APT_PKGS+=("${ALLOC_PKGS[@]}")
# the tests also open the HTML report in a real headless browser
[ "$MODE" = test ] && APT_PKGS+=(chromium chromium-driver)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- Rust (the tidesdb crate needs Rust >= 1.85) ---------------------------------------
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
rust_ok() { command -v cargo >/dev/null 2>&1 && [ "$(rustc --version | awk '{split($2,v,"."); print (v[1]>1 || v[2]>=85)}')" = 1 ]; }
if ! rust_ok; then
  if command -v rustup >/dev/null 2>&1; then
    say "updating Rust with rustup"; rustup toolchain install stable --profile minimal >/dev/null; rustup default stable
  else
    say "installing Rust with rustup"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal >/dev/null
    . "$HOME/.cargo/env"
  fi
fi

# --- Python package in .venv -------------------------------------------------------------
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$PY" -m venv .venv
fi
# the demo installs alloclab's own dependencies; the other modes the tests' too
extra='[test]'; stamp=.venv/.alloclab-installed
[ "$MODE" = demo ] && extra='' && stamp=.venv/.alloclab-installed-demo
[ -f .venv/.alloclab-installed ] && [ .venv/.alloclab-installed -nt pyproject.toml ] && stamp=.venv/.alloclab-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  say "installing alloclab and its Python dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".$extra"
  touch "$stamp"
fi
# the Ray executor is an optional extra; its tests run a real local cluster
if [ "$MODE" = test ] && ! .venv/bin/python -c "import ray" 2>/dev/null; then
  say "installing the Ray executor's extra (ray 2.60) for its tests"
  .venv/bin/python -m pip install -q -e '.[ray]'
fi

# --- the native driver ---------------------------------------------------------------------
say "building the driver (first build takes about 2 minutes on 2 cores)"
# link Debian's RocksDB (.cargo/config.toml says so too; building RocksDB takes ~27 min)
export ROCKSDB_LIB_DIR=${ROCKSDB_LIB_DIR:-/usr/lib/x86_64-linux-gnu}
# cargo's build products are cached outside the checkout, so that a fresh clone (CI's) compiles
# the driver's own crates again but not its dependencies (TidesDB's bundled C, the allocators'
# -sys crates); the binaries alloclab runs are copied into the checkout's driver/target/release; alloclab
# builds on first use there too (core/cache.py, the same rule)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/alloclab/cargo-target}
BUILT=$CARGO_TARGET_DIR/release
REL=driver/target/release
mkdir -p "$REL"
put() { cp "$BUILT/$1" "$REL/$2.tmp" && mv "$REL/$2.tmp" "$REL/$2"; }
# link-time allocators (jemalloc@link, ...): the same driver with the allocator linked in, one
# binary each
LINKED=$(catalog 'print(" ".join(c.LINKABLE))')
[ "$MODE" = demo ] && LINKED=""  # built on first use (alloclab run --allocators jemalloc@link)
for a in $LINKED; do
  cargo build --release --quiet --manifest-path driver/Cargo.toml --features "link-$a"
  put alloclab-driver "alloclab-driver-$a"
done
cargo build --release --quiet --manifest-path driver/Cargo.toml
put alloclab-driver alloclab-driver
ln -sf "$ROOT/driver/target/release/alloclab-driver" .venv/bin/alloclab-driver
# the demo stops here; alloclab builds each of the rest on its first use, with a progress line
if [ "$MODE" != demo ]; then
  # the memory-account helper preloaded into servers (liballoclab_account.so, beside the driver)
  cargo build --release --quiet --manifest-path driver/account/Cargo.toml
  put liballoclab_account.so liballoclab_account.so
  # flame graphs (inferno), cached outside the checkout
  TOOLS=${XDG_CACHE_HOME:-$HOME/.cache}/alloclab/tools
  if [ ! -x "$TOOLS/bin/inferno-flamegraph" ] || [ ! -x "$TOOLS/bin/inferno-diff-folded" ]; then
    say "installing inferno (flame graphs) into $TOOLS (about a minute)"
    cargo install --quiet --locked inferno --root "$TOOLS"
  fi
  # the allocators built from crates' bundled sources (jemalloc@5.3.1, mimalloc@2/@3, Google's
  # TCMalloc, snmalloc, rpmalloc), once, into ~/.cache/alloclab/allocators (about 2.5 minutes)
  .venv/bin/alloclab setup allocators
  # HammerDB 4.12, the seeds' TPC-C client, from ../shared/vendor (checked), cached outside the checkout
  .venv/bin/alloclab setup hammerdb >/dev/null
fi
say "ready: $ROOT/.venv/bin/alloclab (add $ROOT/.venv/bin to PATH, or: source .venv/bin/activate)"

# the studies' stack (Debian trixie root, MariaDB 11.8, TideSQL), cached outside the checkout
if [ "$MODE" = stack ] || [ "$MODE" = test ]; then
  say "the MariaDB 11.8 + TideSQL stack (about 4 minutes the first time, then cached)"
  $SUDO .venv/bin/alloclab setup stack
fi

case "$MODE" in
  install|stack) ;;
  demo)
    # the default study's budget: what is left of ten minutes after setup, less a minute for its
    # report (unless the flags give a budget or a number of runs)
    args=("$@")
    case " $* " in *" --budget"*|*" --runs"*|*" --preset"*|*" --resume"*|*" --plan"*) ;; *)
      left=$((600 - SECONDS - 60)); [ $left -lt 120 ] && left=120
      say "setup took $((SECONDS / 60))m$(printf %02d $((SECONDS % 60)))s; the default study gets what is left of ten minutes: --budget ${left}s"
      args+=(--budget "${left}s") ;;
    esac
    export ALLOCLAB_DEFER_TOOLS=1  # flame graphs: inferno is installed by the next alloclab report
    exec .venv/bin/alloclab run "${args[@]}" ;;
  test)
    say "linters: cargo fmt, clippy, ruff, import-linter (the layers)"
    cargo fmt --manifest-path driver/Cargo.toml --check
    cargo fmt --manifest-path driver/account/Cargo.toml --check
    cargo clippy --release --quiet --manifest-path driver/Cargo.toml -- -D warnings
    cargo clippy --release --quiet --manifest-path driver/account/Cargo.toml -- -D warnings
    .venv/bin/ruff check src tests
    .venv/bin/lint-imports
    say "driver unit tests"
    cargo test --release --quiet --manifest-path driver/Cargo.toml
    say "python tests"
    set +e
    .venv/bin/python -m pytest -q --durations=25 "$@"
    rc=$?
    set -e
    # pytest exits 5 when it collected no test: that is a broken suite, not a pass
    if [ $rc -eq 5 ]; then say "pytest collected no tests"; exit 1; fi
    exit $rc ;;
  *)
    say "unknown mode '$MODE': use demo, test, stack or nothing"; exit 2 ;;
esac
