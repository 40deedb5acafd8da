# shellcheck shell=bash
# Sourced by tests/run-all.sh and tests/fuzz/run.sh: the CMake options their builds share.
# Debug information as line tables (-g1): backtraces, perf and sanitizer reports keep file
# and line, the code is the same, and the builds compile about a fifth faster.
line_tables=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_DEBUG="-g1")
# Unity batches of 16 sources parse the shared headers once per batch: the ASan build takes
# about 180 s instead of 400 on 2 cores, the release build 158 s instead of about 320 (a
# 2-core AMD EPYC). The README's build (and every developer's) stays one file at a time:
# a source that compiles only after its batch-mates fails there.
unity=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16)
