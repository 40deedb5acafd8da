// tether-info: -c dumps every option as KEY=value, -v prints what this build is.
#include <cstdio>
#include <string_view>

#include <fmt/format.h>

#include "pool/memlock.hpp"
#include "runtime/base/build_info.hpp"
#include "runtime/base/config.hpp"
#include "runtime/bootstrap/bootstrap.hpp"
#include "transport/transport.hpp"

namespace {

void print_usage() {
  std::puts("usage: tether-info [-c] [-v]\n"
            "  -c  every TETHER_* option as a paste-able KEY=value line with its doc\n"
            "  -v  version, build type, compiler, transports compiled in, memlock limit");
}

int print_config() {
  const auto& config = tether::config::Config::global();
  fmt::print("{}", config.dump());
  for (const auto& warning : config.warnings()) fmt::print(stderr, "warning: {}\n", warning);
  return config.warnings().empty() ? 0 : 1;
}

void print_version() {
  const auto& info = tether::build_info();
  fmt::print("tether {}\nbuild type: {}\ncompiler: {}\ntransports: {}\nmemlock: {}\n", info.version,
             info.build_type, info.compiler, info.transports.empty() ? "none" : info.transports,
             tether::pool::read_memlock_limit().describe());
  fmt::print("pmix: {}\n", tether::pmix_version_text());
  fmt::print("ofi provider: {}\nnetwork transport: {} (TETHER_NET_TRANSPORT)\n", tether::transport::describe_ofi_choice(),
             tether::transport::network_spec());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 1) {
    print_version();
    return print_config();
  }
  int status = 0;
  for (int i = 1; i < argc; ++i) {
    std::string_view flag(argv[i]);
    if (flag == "-c") {
      status |= print_config();
    } else if (flag == "-v") {
      print_version();
    } else {
      print_usage();
      return flag == "-h" || flag == "--help" ? 0 : 2;
    }
  }
  return status;
}
