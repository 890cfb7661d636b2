#!/usr/bin/env bash
# Builds the Debian package with `cargo deb` and checks what it holds.
#   packaging/deb/build.sh            release build (what to ship)
#   PROFILE=dev packaging/deb/build.sh  the debug binary already built (the
#                                      test command's quick check)
# Installs cargo-deb from crates.io when it is missing. Prints the .deb path.
set -euo pipefail
cd "$(dirname "$0")/../.."
PROFILE=${PROFILE:-release}
if ! cargo deb --version >/dev/null 2>&1; then
  echo "== installing cargo-deb"
  # A debug build of the tool: it only copies and compresses files, and
  # compiles in half the time.
  cargo install cargo-deb --locked --quiet --debug
fi
case "$PROFILE" in
  release) cargo build --release --quiet -p gearshift --features etcd; dir=target/release ;;
  dev) cargo build --quiet -p gearshift --features etcd; dir=target/debug ;;
  *) echo "PROFILE is release or dev" >&2; exit 2 ;;
esac
# Man pages and completions come from the binary's own clap definitions.
rm -rf target/packaging
mkdir -p target/packaging/completions
"$dir/gearshift" man --out target/packaging/man
for sh in bash zsh fish; do
  "$dir/gearshift" completions "$sh" > "target/packaging/completions/gearshift.$sh"
done
mv target/packaging/completions/gearshift.zsh target/packaging/completions/_gearshift
out=$(cargo deb -p gearshift --no-build --profile "$PROFILE" --no-strip --quiet)
deb=$(echo "$out" | tail -n 1)
# What a package must hold, and a binary that runs from it.
contents=$(dpkg-deb --contents "$deb")
for want in ./usr/bin/gearshift ./usr/lib/systemd/system/gearshift.service ./etc/default/gearshift \
    ./usr/share/man/man1/gearshift-serve.1.gz ./usr/share/bash-completion/completions/gearshift \
    ./usr/share/doc/gearshift/examples/gearshift.example.toml; do
  grep -q " $want\$" <<<"$contents" || { echo "FAIL package: $want is missing"; exit 1; }
done
# (Whole outputs in variables: `grep -q` on a pipe would cut its writer
# off, and pipefail would call that a failure.)
info=$(dpkg-deb --info "$deb")
grep -q "Depends:.*adduser" <<<"$info" || { echo "FAIL package: Depends"; echo "$info"; exit 1; }
control=$(dpkg-deb --ctrl-tarfile "$deb" | tar -tf -)
grep -q postinst <<<"$control" || { echo "FAIL package: postinst"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp"
"$tmp/usr/bin/gearshift" --version >/dev/null || { echo "FAIL package: the binary does not run"; exit 1; }
echo "PASS package $deb"
