// TcpRing: the CpRing (model/context_parallel.h) of a context-parallel group whose members are
// processes, possibly on other hosts: member r holds one TCP connection to member r + 1 (it
// writes) and one from member r − 1 (it reads). A frame is an 8-byte little-endian length and one
// message (model/cp_message.h, versioned itself). A writer thread sends queued messages, so
// send_next never waits for the network; a reader thread receives the previous member's frames
// into a queue, so the next shard arrives while the current one is computed.
//
// Start-up (the rendezvous): member 0 listens (port 0: any free port) and reports its port;
// every other member listens too, connects to member 0 and says its rank and ring address
// ("join"); when all have joined, member 0 tells each the address of its next member, and every
// member connects to its next one ("ring" hello with its rank and the group's size) and accepts
// its previous one. Any mismatch (a rank twice, another group size, a hello from the wrong rank,
// a frame over max_message_bytes, a peer gone) is an error naming it; nothing waits past timeout.
//
// Thread safety: one member thread calls send_next / recv_prev / flush; the destructor shuts the
// sockets down and joins both threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/result.h"
#include "model/context_parallel.h"

namespace keel::cp {

struct TcpRingOptions {
  int rank = 0;
  int size = 1;
  std::string listen = "127.0.0.1:0";        // this member's address (port 0: any free port)
  std::string join;                          // members > 0: member 0's address
  std::chrono::milliseconds timeout{60000};  // start-up, and each receive
  size_t max_message_bytes = size_t{1} << 31;
};

class TcpRing : public model::CpRing {
 public:
  // Listens, calls on_listening(port) (member 0 reports it to whoever starts the others), then
  // runs the rendezvous and connects the ring. Errors: InvalidArgument for bad options or
  // addresses, Unavailable for a peer that does not come or goes, Corrupt for a bad hello.
  static Result<std::unique_ptr<TcpRing>> connect(
      const TcpRingOptions& options, const std::function<void(uint16_t port)>& on_listening);
  ~TcpRing() override;

  [[nodiscard]] int rank() const override;
  [[nodiscard]] int size() const override;
  Status send_next(model::CpMessage msg) override;
  Result<model::CpMessage> recv_prev() override;
  Status flush() override;

  struct State;

 private:
  explicit TcpRing(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace keel::cp
