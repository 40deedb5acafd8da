#!/usr/bin/env bash
# run_on_hosts.sh [tether-run options] program [args...]: tether-run with
# --netns "$HOSTS_TEST_NAMES" added, so the launcher-agnostic checks of other folders
# (tests/bench/osu_smoke.sh, persist_smoke.sh, tests/apps/run_halo.sh) place their ranks
# on the test hosts that hosts_test.sh built. Not for use on its own.
exec "${HOSTS_TEST_TETHER_RUN:?set by hosts_test.sh}" --netns "${HOSTS_TEST_NAMES:?set by hosts_test.sh}" "$@"
