// ExpertChannel: the link between an expert-parallel leader and one expert member, as both ends
// see it — two mailboxes holding one frame (ep/expert_frame.h) each: a request (leader → member)
// and a reply (member → leader), with sequence numbers. A side writes its outgoing mailbox in
// place, posts it, and waits for the other side's next frame; strict alternation (one request,
// one reply) means neither mailbox is written while the other side reads it. Two transports:
// ShmChannel (ep/shm_channel.h, a POSIX shared-memory object, members on this host) and
// UcxChannel (ep/ucx_channel.h, UCX active messages, members on other hosts).
//
// wait_for_post: the waiting half both use — spin briefly on a sequence number, then sleep on a
// futex in short slices, asking between slices whether the peer is still there.
//
// Thread safety: each side uses its end from one thread at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "core/result.h"
#include "core/status.h"

namespace keel::ep {

class ExpertChannel {
 public:
  virtual ~ExpertChannel() = default;

  // The mailboxes: the leader writes request() and reads reply(), the member the other way.
  [[nodiscard]] virtual std::span<std::byte> request() = 0;
  [[nodiscard]] virtual std::span<std::byte> reply() = 0;

  // Publishes the frame just written to the request mailbox (leader) / the reply mailbox (member).
  virtual void post_request() = 0;
  virtual void post_reply() = 0;

  // Waits until the other side has posted past `seen` (the last number this side consumed), for
  // at most `timeout`; `alive` (may be empty) is asked every ~50 ms and ends the wait with
  // Unavailable when it says no. Returns the new number; Unavailable on timeout ("no answer in
  // N ms") or when the channel knows its peer is gone.
  virtual Result<uint32_t> wait_request(uint32_t seen, std::chrono::milliseconds timeout,
                                        const std::function<bool()>& alive) = 0;
  virtual Result<uint32_t> wait_reply(uint32_t seen, std::chrono::milliseconds timeout,
                                      const std::function<bool()>& alive) = 0;

  // The numbers so far (0 before the first): the side that waits for them may start from these.
  [[nodiscard]] virtual uint32_t request_seq() const = 0;
  [[nodiscard]] virtual uint32_t reply_seq() const = 0;

  // Member: makes the mailboxes hold a request of request_bytes and a reply of reply_bytes (the
  // hello's batch size); ResourceExhausted when a fixed-size channel cannot.
  virtual Status reserve(size_t request_bytes, size_t reply_bytes) = 0;
  // Leader: the member answered the hello (a shared-memory channel's name is no longer needed).
  virtual void connected() {}
};

// Spins up to `spin`, then futex-waits on `seq` in slices until it differs from `seen` (acquire),
// `timeout` passes, or `alive` (asked each slice; may be empty) says no.
Result<uint32_t> wait_for_post(std::atomic<uint32_t>& seq, uint32_t seen,
                               std::chrono::milliseconds timeout,
                               const std::function<bool()>& alive);

// Wakes the waiters of `seq` (after its increment).
void wake_post_waiters(std::atomic<uint32_t>& seq);

}  // namespace keel::ep
