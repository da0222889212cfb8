// The wire codec: the one encoding of the engine's messages (types.h) for crossing a process
// boundary — a generation request, its token events, the engine's stats and metrics, context
// caches, a Status —
// so that a remote EngineClient (a gateway in front of task executors) carries exactly what the
// in-process one does and the server's generation code runs unchanged on either.
//
// Format: MessagePack (the binary form of a JSON document; vLLM's frontend ↔ engine-core messages
// are msgpack too). Chosen over JSON text because logprobs are floats that may be -inf (JSON has
// no infinities) and token arrays are half the size; chosen over a hand-rolled binary layout
// because every frame stays inspectable with any msgpack tool and fields are named, so a newer
// sender's extra fields are ignored by an older receiver. Each message is an envelope
//   {"v": kVersion, "type": "<message type>", "body": {...named fields...}}
// Fields at their default value may be omitted; a receiver reads a missing field as the default.
// Versioning: `v` changes when a field's meaning or type changes (a receiver refuses any other
// version); adding an optional field does not change it.
//
// Decoding is total: any byte string yields a value or InvalidArgument naming the first problem
// (nesting deeper than kMaxDepth, a wrong type, a number out of its field's range, an unknown enum
// name). It checks shape only: what a value means (a token id inside the vocabulary, sampling
// ranges) is checked where it is used — Engine::submit — as for in-process callers. Fuzzed by
// tests/fuzz/wire_fuzz.cpp.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/status.h"
#include "engine/types.h"

namespace keel::engine::wire {

inline constexpr int64_t kVersion = 1;
// Deepest nesting of arrays and maps a decoder accepts (the messages need 5).
inline constexpr int kMaxDepth = 16;

using Bytes = std::vector<uint8_t>;

enum class MessageType {
  kGenerationRequest,  // "generation_request"
  kTokenEvent,         // "token_event": one event of one request (EventFrame)
  kEngineStats,        // "engine_stats"
  kMetrics,            // "metrics": a MetricsSnapshot
  kStatus,             // "status": the outcome of a call (e.g. a refused submit)
  kContextCaches,      // "context_caches": ContextCacheInfo list (find_cache: 0 or 1; list_caches)
};
[[nodiscard]] std::string_view message_type_name(MessageType type);

// A token event with the request it belongs to (a connection carries many requests' events).
struct EventFrame {
  RequestKey key = 0;
  TokenEvent event;
  friend bool operator==(const EventFrame&, const EventFrame&) = default;
};

[[nodiscard]] Bytes encode(const GenerationRequest& request);
[[nodiscard]] Bytes encode(const EventFrame& frame);
[[nodiscard]] Bytes encode(const EngineStats& stats);
[[nodiscard]] Bytes encode(const MetricsSnapshot& metrics);
[[nodiscard]] Bytes encode(const Status& status);
[[nodiscard]] Bytes encode(const std::vector<ContextCacheInfo>& caches);

// The type of an envelope (checks the version), without decoding its body.
[[nodiscard]] Result<MessageType> peek_type(std::span<const uint8_t> bytes);

[[nodiscard]] Result<GenerationRequest> decode_request(std::span<const uint8_t> bytes);
[[nodiscard]] Result<EventFrame> decode_event(std::span<const uint8_t> bytes);
[[nodiscard]] Result<EngineStats> decode_stats(std::span<const uint8_t> bytes);
[[nodiscard]] Result<MetricsSnapshot> decode_metrics(std::span<const uint8_t> bytes);
[[nodiscard]] Result<std::vector<ContextCacheInfo>> decode_caches(std::span<const uint8_t> bytes);
// Ok with *out = the carried Status (ok or not), or InvalidArgument when the bytes are not one.
[[nodiscard]] Status decode_status(std::span<const uint8_t> bytes, Status* out);

}  // namespace keel::engine::wire
