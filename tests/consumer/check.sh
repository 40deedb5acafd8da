#!/usr/bin/env bash
# check.sh PREFIX BUILD_DIR: builds the consumer with find_package and with pkg-config.
set -euo pipefail
prefix=$1 build=$2
here=$(cd "$(dirname "$0")" && pwd)
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$build" >/dev/null
LD_LIBRARY_PATH="$prefix/lib:${LD_LIBRARY_PATH:-}" "$build/consumer"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
c++ -o "$build/consumer-pc" "$here/consumer.cpp" $(pkg-config --cflags --libs tether)
LD_LIBRARY_PATH="$prefix/lib:${LD_LIBRARY_PATH:-}" "$build/consumer-pc"
echo "consumer: find_package and pkg-config builds passed"
