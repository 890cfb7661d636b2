#!/usr/bin/env bash
# Prints the fuzz targets, one per line: every [[bin]] in fuzz/Cargo.toml,
# the one list the scripts read.
sed -n '/^\[\[bin\]\]/,/^name/s/^name = "\(.*\)"/\1/p' "$(dirname "$0")/Cargo.toml"
