# Needs the harness in ../shared/bench (rawload.c and gearload.c), beside
# this repository's root; BENCH=DIR points elsewhere.
#
# Shared set-up of the fsync A_submit bound scripts (fsync-bound.sh,
# fsync-yardstick-variants.sh), sourced from the repository's root with
# $1 the Gearshift binary and NAME the work directory's prefix: checks the
# binary, builds the yardstick server when missing, makes a work directory
# (removed on exit) and compiles the harness's load tools into it.
# Sets BENCH, REPS, DIR, GS, YARD, WORK, RAW and GL.
BENCH=${BENCH:-../shared/bench}
REPS=${REPS:-3}
DIR=${DIR:-/tmp}
GS=${1:-$PWD/target/release/gearshift}
[ -x "$GS" ] || { echo "no gearshift binary at $GS (cargo build --release -p gearshift)" >&2; exit 2; }
YARD=${YARD:-$PWD/target/release/examples/fsync_ceiling}
[ -x "$YARD" ] || cargo build --release -q -p gearshift-server --example fsync_ceiling
WORK=$(mktemp -d "$DIR/$NAME.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
RAW=$WORK/rawload
GL=$WORK/gearload
cc -O2 -w -o "$RAW" "$BENCH/rawload.c" -lm
cc -O2 -w -o "$GL" "$BENCH/gearload.c" -lgearman -lpthread -lm
