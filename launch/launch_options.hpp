// The tether-run command line.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "tether/error.hpp"

namespace tether::launch {

// --bind-to: auto binds like core a job of 2 ranks that fit the CPUs this launcher may use,
// and leaves any other unbound (launch/binding.hpp).
enum class Binding { automatic, core, none };

struct LaunchOptions {
  int ranks = 0;
  std::chrono::nanoseconds timeout{0};                       // 0: none
  std::chrono::nanoseconds kill_after{std::chrono::seconds(10)};  // survivors' grace after a failure
  bool tag_output = false;
  Binding binding = Binding::automatic;                      // --bind-to: rank r on the r-th allowed CPU, or not
  std::vector<std::string> netns;                            // --netns: one host per namespace
  bool show_help = false;
  std::vector<std::string> command;                          // program and its arguments
};

[[nodiscard]] std::string usage_text();
Expected<LaunchOptions> parse_command_line(int argc, char** argv);

}  // namespace tether::launch
