#!/bin/sh
# Regenerates the build system; tap-driver.sh comes from the installed automake.
set -e
cd "$(dirname "$0")"
mkdir -p build-aux
autoreconf -fi
