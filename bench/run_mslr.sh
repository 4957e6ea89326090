#!/bin/sh
# MSLR against LIBLINEAR -s 6 and fgm's logistic FGM at matched feature counts
# (issue 11; bench/compare_mslr.py). Results: bench/results/compare_mslr*.csv.
set -eu
cd "$(dirname "$0")/.."
/usr/bin/python3 bench/compare_mslr.py --fgm build/fgm "$@"
