#!/usr/bin/env bash
# Builds every fuzz target with plain stable cargo, the way `cargo fuzz build
# --sanitizer none --debug-assertions` does: libFuzzer's coverage
# instrumentation, debug assertions and overflow checks. No sanitizer: the
# workspace forbids unsafe code, so there is no memory error for
# AddressSanitizer to find, and without it builds and runs are faster.
# FUZZ_PROFILE picks the cargo profile (default release; the short run uses
# fuzz-short, see Cargo.toml). Prints the directory of the built binaries.
set -euo pipefail
cd "$(dirname "$0")"
profile=${FUZZ_PROFILE:-release}
host=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Cpasses=sancov-module \
 -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
 -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares \
 --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
# --target keeps the flags off build scripts and proc macros.
cargo build --quiet --profile "$profile" --target "$host" --bins >&2
echo "${CARGO_TARGET_DIR:-$PWD/target}/$host/$profile"
