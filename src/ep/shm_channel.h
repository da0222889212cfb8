// ShmChannel: the ExpertChannel (ep/expert_channel.h) between an expert-parallel leader and one
// expert member on the same host — a POSIX shared-memory object holding a control block and the
// two mailboxes, request (leader → member) and reply (member → leader). A side writes its mailbox
// in place, then bumps its sequence number (release) and wakes the other through a futex on it;
// the other spins briefly (a layer's reply is often microseconds away), then sleeps on the futex
// in short slices, asking between slices whether its peer is still alive.
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
#include "ep/expert_channel.h"

namespace keel::ep {

class ShmChannel final : public ExpertChannel {
 public:
  // Leader: a new object with mailboxes of these sizes (rounded up to pages).
  static Result<std::unique_ptr<ShmChannel>> create(size_t request_bytes, size_t reply_bytes);
  // Member: the object the leader created under `name`. NotFound when it is gone; Corrupt when it
  // is not a channel of this version.
  static Result<std::unique_ptr<ShmChannel>> attach(const std::string& name);
  ~ShmChannel() override;  // unmaps; the creator also unlinks the name if still linked
  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;

  [[nodiscard]] const std::string& name() const { return name_; }
  // Removes the name (the mapping stays). Idempotent; the creator's.
  void unlink();

  // ExpertChannel; the numbers count posts (0 before the first).
  [[nodiscard]] std::span<std::byte> request() override { return request_; }
  [[nodiscard]] std::span<std::byte> reply() override { return reply_; }
  void post_request() override;
  void post_reply() override;
  Result<uint32_t> wait_request(uint32_t seen, std::chrono::milliseconds timeout,
                                const std::function<bool()>& alive) override;
  Result<uint32_t> wait_reply(uint32_t seen, std::chrono::milliseconds timeout,
                              const std::function<bool()>& alive) override;
  [[nodiscard]] uint32_t request_seq() const override;
  [[nodiscard]] uint32_t reply_seq() const override;
  // The mailboxes' sizes are fixed at create(): ResourceExhausted when they are smaller.
  Status reserve(size_t request_bytes, size_t reply_bytes) override;
  void connected() override { unlink(); }

  struct Control;

 private:
  ShmChannel() = default;

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
