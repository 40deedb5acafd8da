// tether-bw: streaming bandwidth from rank 0 to rank 1 over tether::Runtime.
#include "apps/bench/tether_endpoint.hpp"

int main(int argc, char** argv) { return tether::bench::tether_app_main(argc, argv, tether::bench::Test::bandwidth); }
