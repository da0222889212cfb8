// ShmChannel: the shared-memory link between an expert-parallel leader and one expert member on
// the same host — a POSIX shared-memory object holding a control block and two mailboxes, one
// request (leader → member) and one reply (member → leader), each holding one frame
// (ep/expert_frame.h) at a time. A side writes its mailbox, then bumps its sequence number
// (release) and wakes the other through a futex on it; the other spins briefly (a layer's reply
// is often microseconds away), then sleeps on the futex in short slices, asking between slices
// whether its peer is still alive. Strict alternation (one request, one reply) means no mailbox is
// ever written while the other side reads it.
//
// The leader create()s the object under a fresh name (/keel-ep-<pid>-<n>-<random>), hands the
// name to the member, which attach()es, and unlinks the name once the member is attached (or
// when the channel is destroyed), so nothing is left in /dev/shm.
//
// Thread safety: each side uses its end from one thread at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "core/result.h"
#include "core/status.h"

namespace keel::ep {

class ShmChannel {
 public:
  // Leader: a new object with mailboxes of these sizes (rounded up to pages).
  static Result<std::unique_ptr<ShmChannel>> create(size_t request_bytes, size_t reply_bytes);
  // Member: the object the leader created under `name`. NotFound when it is gone; Corrupt when it
  // is not a channel of this version.
  static Result<std::unique_ptr<ShmChannel>> attach(const std::string& name);
  ~ShmChannel();  // unmaps; the creator also unlinks the name if still linked
  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;

  [[nodiscard]] const std::string& name() const { return name_; }
  // Removes the name (the mapping stays). Idempotent; the creator's.
  void unlink();

  [[nodiscard]] std::span<std::byte> request() { return request_; }
  [[nodiscard]] std::span<std::byte> reply() { return reply_; }

  // Publishes the request mailbox's new frame (leader) / the reply's (member).
  void post_request();
  void post_reply();

  // Waits until the other side has posted past `seen` (the last number this side consumed), for
  // at most `timeout`; `alive` (may be empty) is asked every ~50 ms and ends the wait with
  // Unavailable when it says no. Returns the new number; Unavailable on timeout ("no reply in
  // N ms").
  Result<uint32_t> wait_request(uint32_t seen, std::chrono::milliseconds timeout,
                                const std::function<bool()>& alive);
  Result<uint32_t> wait_reply(uint32_t seen, std::chrono::milliseconds timeout,
                              const std::function<bool()>& alive);

  // The numbers posted so far (0 before the first post).
  [[nodiscard]] uint32_t request_seq() const;
  [[nodiscard]] uint32_t reply_seq() const;

  struct Control;

 private:
  ShmChannel() = default;
  Result<uint32_t> wait(std::atomic<uint32_t>& seq, uint32_t seen,
                        std::chrono::milliseconds timeout, const std::function<bool()>& alive);

  std::string name_;
  bool creator_ = false;
  bool linked_ = false;
  std::byte* base_ = nullptr;
  size_t size_ = 0;
  Control* control_ = nullptr;
  std::span<std::byte> request_;
  std::span<std::byte> reply_;
};

}  // namespace keel::ep
