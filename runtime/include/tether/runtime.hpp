// The tether runtime: PMIx bootstrap, a transport, and non-blocking point-to-point
// messages (eager below TETHER_EAGER_LIMIT, rendezvous above it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "tether/error.hpp"

namespace tether {

class Bootstrap;
namespace messaging {
class Engine;
}

inline constexpr int kAnySource = -1;
inline constexpr int kAnyTag = -1;

// What a finished request did.
struct MessageInfo {
  int source = -1;              // receives: who sent it
  int tag = -1;                 // receives: its tag
  std::size_t bytes = 0;        // the message's size as sent
  std::size_t received_bytes = 0;  // what landed (< bytes when truncated)
  Errc error = Errc::ok;        // ok, truncated, peer_unreachable, transport, ...
};

// Names one send or receive in flight. Plain value; becomes stale once test() or wait()
// reported it finished (a second wait is refused with an error).
struct Request {
  std::uint32_t slot = 0xffffffffU;
  std::uint32_t generation = 0;
  [[nodiscard]] bool valid() const noexcept { return slot != 0xffffffffU; }
};

class Runtime {
 public:
  // Connects to the PMIx server that launched this process, opens the transport and
  // registers the pinned pool with it. Fails with how to launch when there is no server.
  static Expected<std::unique_ptr<Runtime>> start();
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  [[nodiscard]] int rank() const noexcept;
  [[nodiscard]] int size() const noexcept;

  // Hot path. posted: finishes later; done: finished already (eager: the buffer may be
  // reused); error: nothing was started, see last_error(). Any thread may call these.
  [[nodiscard]] Status isend(const void* buffer, std::size_t bytes, int peer, int tag, Request& request) noexcept;
  [[nodiscard]] Status irecv(void* buffer, std::size_t bytes, int source, int tag, Request& request) noexcept;
  // done (info filled, the request is finished and stale), posted, or error (info says why).
  [[nodiscard]] Status test(Request& request, MessageInfo* info = nullptr) noexcept;
  [[nodiscard]] Status wait(Request& request, MessageInfo* info = nullptr) noexcept;
  // done when every request finished without error; error otherwise (each one finished).
  [[nodiscard]] Status wait_all(std::span<Request> requests, std::span<MessageInfo> infos = {}) noexcept;
  // Moves messages along; called by test/wait, or by the progress thread.
  void progress() noexcept;
  // Why this thread's last call returned Status::error.
  [[nodiscard]] const Error& last_error() const noexcept;

  // Waits for every rank (a PMIx fence).
  [[nodiscard]] Expected<void> barrier();
  [[nodiscard]] Bootstrap& bootstrap() noexcept;
  [[nodiscard]] messaging::Engine& engine() noexcept { return *engine_; }

 private:
  explicit Runtime(std::unique_ptr<messaging::Engine> engine);
  std::unique_ptr<messaging::Engine> engine_;
};

}  // namespace tether
