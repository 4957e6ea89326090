#!/bin/sh
# MSLR against LIBLINEAR -s 6 and fgm's logistic FGM at matched feature counts
# (issue 11; bench/compare_mslr.py), and MSLR's news20 path timed side by side
# with a LIBLINEAR -s 6 sweep (issue 22; bench/mslr_speed.py). Results:
# bench/results/compare_mslr*.csv, bench/results/mslr_speed.csv.
set -eu
cd "$(dirname "$0")/.."
/usr/bin/python3 bench/compare_mslr.py --fgm build/fgm "$@"
/usr/bin/python3 bench/mslr_speed.py --fgm build/fgm "$@"
