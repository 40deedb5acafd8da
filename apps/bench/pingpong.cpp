// tether-pingpong: one-way latency between ranks 0 and 1 over tether::Runtime.
#include "apps/bench/tether_endpoint.hpp"

int main(int argc, char** argv) { return tether::bench::tether_app_main(argc, argv, tether::bench::Test::latency); }
