// tether-bench-persist: persistent-channel ping-pong latency and streaming bandwidth
// between ranks 0 and 1, and tether's isend/irecv at the same sizes in the same run.
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "apps/bench/bench_loops.hpp"
#include "apps/bench/channel_link.hpp"
#include "apps/bench/persist_report.hpp"
#include "apps/bench/persistent_loops.hpp"
#include "apps/bench/tether_endpoint.hpp"
#include "runtime/bootstrap/bootstrap.hpp"
#include "runtime/messaging/engine.hpp"

namespace tether::bench {
namespace {

constexpr int kLatencyTag = 100;          // ping-pong channels, both directions
constexpr int kStreamForwardTag = 101;    // rank 0 -> 1, a landing slot per message of the window
constexpr int kStreamBackwardTag = 102;   // rank 1 -> 0: verification replies and acknowledgements
constexpr std::uint32_t kBackwardSlots = 2;

ChannelShape shape(int peer, int tag, std::size_t slot_bytes, std::uint32_t slots) {
  ChannelShape result;
  result.peer = peer;
  result.tag = tag;
  result.slot_bytes = slot_bytes;
  result.slots = slots;
  return result;
}

Expected<ChannelLink> connect_latency_link(Runtime& runtime, const PersistOptions& options) {
  ChannelShape both = shape(1 - runtime.rank(), kLatencyTag, largest_size(options), options.latency_slots);
  return ChannelLink::connect(runtime, both, both);
}

Expected<ChannelLink> connect_stream_link(Runtime& runtime, const PersistOptions& options) {
  int peer = 1 - runtime.rank();
  ChannelShape forward = shape(peer, kStreamForwardTag, largest_size(options), streaming_slots(options));
  ChannelShape backward = shape(peer, kStreamBackwardTag, largest_size(options), kBackwardSlots);
  if (runtime.rank() == 0) return ChannelLink::connect(runtime, forward, backward);
  return ChannelLink::connect(runtime, backward, forward);
}

// Everything ranks 0 and 1 measure with: the channels and isend/irecv's buffers.
struct MeasuringRank {
  MeasuringRank(Runtime& runtime, ChannelLink latency, ChannelLink stream, std::size_t largest_bytes)
      : latency_link(std::move(latency)), stream_link(std::move(stream)), endpoint(runtime, false),
        buffers(endpoint, largest_bytes + 8) {}
  ChannelLink latency_link;
  ChannelLink stream_link;
  TetherEndpoint endpoint;
  BufferPair<TetherEndpoint> buffers;
};

bool measure_isend(MeasuringRank& rank, const Options& options, std::size_t bytes, Failure& failure, double& result) {
  if (!verify_size(rank.endpoint, rank.buffers, bytes, failure)) return false;
  bool timed = options.test == Test::latency ? time_latency(rank.endpoint, options, rank.buffers, bytes, result)
                                             : time_bandwidth(rank.endpoint, options, rank.buffers, bytes, result);
  return timed || failure.set(rank.endpoint.error());
}

// Both figures of both APIs at one size, interleaved so drifting load hits them alike.
bool measure_size(MeasuringRank& rank, const PersistOptions& options, std::size_t bytes, bool corrupt,
                  std::vector<Figure>& figures, Failure& failure) {
  Options latency = loop_options(options, Test::latency);
  Options bandwidth = loop_options(options, Test::bandwidth);
  Figure channel{"channel", bytes};
  Figure isend{"isend", bytes};
  bool ok = measure_persistent(rank.latency_link, latency, bytes, corrupt, failure, channel.latency_us) &&
            measure_isend(rank, latency, bytes, failure, isend.latency_us) &&
            measure_persistent(rank.stream_link, bandwidth, bytes, false, failure, channel.bandwidth_mbs) &&
            measure_isend(rank, bandwidth, bytes, failure, isend.bandwidth_mbs);
  if (!ok) return false;
  figures.push_back(channel);
  figures.push_back(isend);
  return true;
}

[[noreturn]] void abort_job(Runtime& runtime, const char* program, const std::string& why) {
  fmt::print(stderr, "{}: rank {}: {}\n", program, runtime.rank(), why);
  std::fflush(stderr);
  runtime.bootstrap().abort(1, "tether-bench-persist failed");
}

ChannelLink connected_or_abort(Runtime& runtime, Expected<ChannelLink> link, const char* what, const char* program) {
  if (!link) abort_job(runtime, program, fmt::format("{}: {}", what, link.error().message()));
  return std::move(*link);
}

// Ranks 0 and 1: the channels (ping-pong first, then streaming) and the isend buffers.
void connect_measuring_rank(Runtime& runtime, const PersistOptions& options, const char* program,
                            std::optional<MeasuringRank>& measuring) {
  ChannelLink latency = connected_or_abort(runtime, connect_latency_link(runtime, options), "ping-pong channels", program);
  ChannelLink stream = connected_or_abort(runtime, connect_stream_link(runtime, options), "streaming channels", program);
  measuring.emplace(runtime, std::move(latency), std::move(stream), largest_size(options));
  if (!measuring->buffers.ok()) abort_job(runtime, program, "isend/irecv buffers: " + measuring->endpoint.error());
}

ReportSettings report_settings(Runtime& runtime, const PersistOptions& options) {
  ReportSettings settings;
  settings.program = "tether-bench-persist";
  settings.transport = std::string(runtime.engine().transport().name());
  settings.apis.push_back({"channel", "tether persistent channel",
                           fmt::format("SendChannel/ReceiveChannel created once: ping-pong {} slots, streaming {} "
                                       "slots, slot {} B, pinned pool",
                                       options.latency_slots, streaming_slots(options), largest_size(options))});
  settings.apis.push_back({"isend", "tether isend/irecv", "Runtime::isend/irecv, pinned pool buffers"});
  ChannelStats stats = channel_stats(runtime);
  settings.notes.push_back(fmt::format("rank 0 channel counters: {} channels, {} handshake messages, {} data writes, "
                                       "{} data sends, {} credit writes, {} credit messages, {} piggybacked credits, "
                                       "{} send copies, {} rejected notifications, {} direct stores "
                                       "({} in the flag line), {} waits for a warm slot",
                                       stats.channels_created, stats.handshake_messages, stats.data_writes,
                                       stats.data_messages, stats.credit_writes, stats.credit_messages,
                                       stats.piggybacked_credits, stats.send_copies, stats.rejected_notifications,
                                       stats.direct_stores, stats.flag_line_messages, stats.warm_slot_waits));
  return settings;
}

// Every size on ranks 0 and 1 (others join the barriers); rank 0 prints. Exit code.
int run_persist_bench(Runtime& runtime, const PersistOptions& options, const char* program) {
  std::optional<MeasuringRank> measuring;
  if (runtime.rank() <= 1) connect_measuring_rank(runtime, options, program, measuring);
  std::vector<Figure> figures;
  bool corrupt = options.corrupt_first_message;
  for (std::size_t bytes : options.sizes_bytes) {
    if (!runtime.barrier()) abort_job(runtime, program, "barrier failed");
    Failure failure;
    if (measuring && !measure_size(*measuring, options, bytes, std::exchange(corrupt, false), figures, failure))
      abort_job(runtime, program, fmt::format("at {} bytes: {}", bytes, failure.why));
  }
  if (!runtime.barrier()) abort_job(runtime, program, "final barrier failed");
  if (runtime.rank() == 0) print_report(options, report_settings(runtime, options), figures);
  return 0;
}

int bench_persist_main(int argc, char** argv) {
  int exit_code = 0;
  auto options = parse_persist_options(argc, argv, exit_code);
  if (!options) return exit_code;
  auto runtime = start_two_rank_runtime(argv[0], exit_code);
  if (!runtime) return exit_code;
  return run_persist_bench(*runtime, *options, argv[0]);
}

}  // namespace
}  // namespace tether::bench

int main(int argc, char** argv) { return tether::bench::bench_persist_main(argc, argv); }
