// The expert-parallel messages between a leader (attention, routers, its own experts) and an
// expert member (ep/expert_member.h), and their versioned codec. Each message is one frame in a
// shared-memory mailbox (ep/shm_channel.h): a 16-byte header {magic "KEPE", version, kind, seq,
// body bytes}, then the body, little-endian, every array 4-byte aligned:
//   kHello  leader → member: the model's shape, the member's shard and the replicas it is to hold
//           (EpHello: … n_replicas i32, then (layer, expert) i32 pairs); answered by kReady or
//           kError — a member that loaded another model or shard refuses; one holding other
//           replicas reloads its experts first (expert_member.h).
//   kWork   leader → member: one layer's remote slots (EpWorkHeader, then rows f32
//           [n_rows][n_embd], slot_row i32 [n_slots], slot_expert i32 [n_slots]).
//   kOutputs member → leader: the slots' expert outputs, f32 [n_slots][n_embd], in slot order,
//           and the member's compute time for them.
//   kError  member → leader: a status code and message (a malformed frame, an expert it lacks).
//   kBye    leader → member: the leader is done; the member exits.
// Decoding checks every size against the frame; a frame that does not decode is an error, never a
// read past its end.
//
// Thread safety: pure functions over caller-owned bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/status.h"
#include "model/remote_experts.h"

namespace keel::ep {

inline constexpr uint32_t kFrameMagic = 0x4550454B;  // "KEPE" little-endian
inline constexpr uint16_t kFrameVersion = 2;         // 2: the hello names replicas
inline constexpr size_t kFrameHeaderBytes = 16;

enum class FrameKind : uint16_t {
  kHello = 1,
  kWork = 2,
  kBye = 3,
  kReady = 101,
  kOutputs = 102,
  kError = 103,
};

struct Frame {
  FrameKind kind = FrameKind::kHello;
  uint32_t seq = 0;
  std::span<const std::byte> body;
};

// What the member must match: the model's shape and its place in the instance.
struct EpHello {
  uint64_t model_bytes = 0;  // the GGUF file's size
  int32_t n_layer = 0;
  int32_t n_embd = 0;
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_exp = 0;
  int32_t shard_index = 0;  // the member's shard
  int32_t shard_count = 0;
  int32_t max_rows = 0;  // rows of one work frame at most (the leader's batch size)
  // Replicated experts the member holds beyond its range (ExpertShard::replicas), sorted.
  std::vector<std::pair<int32_t, int32_t>> replicas;
  friend bool operator==(const EpHello&, const EpHello&) = default;
};

// A decoded kWork body (views into the frame).
struct WorkView {
  int32_t layer = 0;
  int32_t n_rows = 0;
  int32_t n_slots = 0;
  int32_t n_embd = 0;
  const float* rows = nullptr;
  const int32_t* slot_row = nullptr;
  const int32_t* slot_expert = nullptr;
};

// A decoded kOutputs body.
struct OutputsView {
  int32_t n_slots = 0;
  int32_t n_embd = 0;
  uint64_t compute_ns = 0;  // the member's time computing them
  const float* ys = nullptr;
};

// Bytes of a kWork frame / a kOutputs frame of these sizes (header included).
[[nodiscard]] size_t work_frame_bytes(int64_t n_rows, int64_t n_slots, int64_t n_embd);
[[nodiscard]] size_t outputs_frame_bytes(int64_t n_slots, int64_t n_embd);

// Each encoder writes one frame at out's start and returns its size; InvalidArgument (nothing
// useful written) when out is too small.
Result<size_t> encode_hello(const EpHello& h, uint32_t seq, std::span<std::byte> out);
Result<size_t> encode_work(const model::ExpertWork& w, int32_t n_embd, uint32_t seq,
                           std::span<std::byte> out);
Result<size_t> encode_bare(FrameKind kind, uint32_t seq, std::span<std::byte> out);  // kReady, kBye
Result<size_t> encode_error(const Status& s, uint32_t seq, std::span<std::byte> out);
// A kOutputs frame's header; the n_slots · n_embd floats go to outputs_area(out) (written by the
// caller in place, before or after). InvalidArgument when out is too small.
Result<size_t> encode_outputs(int32_t n_slots, int32_t n_embd, uint64_t compute_ns, uint32_t seq,
                              std::span<std::byte> out);
[[nodiscard]] float* outputs_area(std::span<std::byte> out);

// Corrupt for a bad magic, an unknown kind or a body past the bytes; Unsupported for another
// version.
Result<Frame> decode_frame(std::span<const std::byte> bytes);
// Also Corrupt for more replicas than n_layer · n_expert or a body of the wrong size.
Result<EpHello> decode_hello(const Frame& f);
// Also Corrupt for a slot row ≥ n_rows or a negative count.
Result<WorkView> decode_work(const Frame& f);
Result<OutputsView> decode_outputs(const Frame& f);
// The Status a kError frame carries (Corrupt when it does not decode).
Status decode_error(const Frame& f);

}  // namespace keel::ep
