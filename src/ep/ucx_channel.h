// UcxChannel: the ExpertChannel (ep/expert_channel.h) between an expert-parallel leader and an
// expert member on another host — UCX active messages over whatever UCX finds between the hosts
// (TCP, or RDMA where present). Each posted frame is copied and sent as one message; the
// receiving side queues it, bumps its arrival count and wakes its waiter (the same spin-then-
// futex wait as the shared-memory channel), and the next wait takes it as its mailbox.
//
// The leader connect()s to a member that listen()s (`keel ep-expert --listen`); the member answers
// each request on the connection it came from, so leader after leader (a restarted gang) can use
// the same member. Endpoints use UCX's peer error handling: a leader learns of a vanished member
// (its process gone, its host unreachable) as an error of its connection, and its waits then fail
// with Unavailable naming the cause; a hung member is the caller's step timeout.
//
// The UCX worker has its own progress thread, woken by UCX's event fd (net::UcxWorker with
// wakeup): idle channels do not spin.
//
// Thread safety: each side uses its end from one thread at a time (any thread); port() from any.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/result.h"
#include "ep/expert_channel.h"

namespace keel::ep {

class UcxChannel final : public ExpertChannel {
 public:
  // Leader: connects to the member listening at `address` ("HOST:PORT"), with a request mailbox
  // of request_bytes. Unavailable when the member cannot be reached within `timeout`.
  static Result<std::unique_ptr<UcxChannel>> connect(const std::string& address,
                                                     size_t request_bytes,
                                                     std::chrono::milliseconds timeout);
  // Member: listens on host:port (port 0: a free one, see port()).
  static Result<std::unique_ptr<UcxChannel>> listen(const std::string& host, uint16_t port);
  ~UcxChannel() override;  // frames already posted are flushed (bounded), then the worker stops
  UcxChannel(const UcxChannel&) = delete;
  UcxChannel& operator=(const UcxChannel&) = delete;

  // The port a listening channel is bound to (0 for a leader's).
  [[nodiscard]] uint16_t port() const;
  // Member: a leader has connected, and every leader connection has failed since (its process
  // gone or its host cut off: UCX's peer error handling). A member that lives and dies with its
  // leader (`keel ep-expert --exit-with-leader`) asks this while idle.
  [[nodiscard]] bool leaders_gone() const;

  // ExpertChannel; the incoming side's number counts frames taken, the outgoing side's frames
  // posted.
  [[nodiscard]] std::span<std::byte> request() override;
  [[nodiscard]] std::span<std::byte> reply() override;
  void post_request() override;
  void post_reply() override;
  Result<uint32_t> wait_request(uint32_t seen, std::chrono::milliseconds timeout,
                                const std::function<bool()>& alive) override;
  Result<uint32_t> wait_reply(uint32_t seen, std::chrono::milliseconds timeout,
                              const std::function<bool()>& alive) override;
  [[nodiscard]] uint32_t request_seq() const override;
  [[nodiscard]] uint32_t reply_seq() const override;
  Status reserve(size_t request_bytes, size_t reply_bytes) override;

  struct Impl;

 private:
  explicit UcxChannel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace keel::ep
