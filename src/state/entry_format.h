// The on-disk formats of the state store (state_store.h), all integers little-endian.
//
// An entry file (a record or a blob) is a 32-byte header, then the payload:
//   0  magic "KEELST01" (8 bytes)      8  payload size u64
//   16 payload checksum u64 (XXH3-64 of the payload)
//   24 header checksum u64 (XXH3-64 of bytes 0..23)
// The file holds exactly 32 + size bytes: fewer is a truncated entry, more a damaged one.
//
// A log file (entries appended one at a time) is a sequence of frames, each a 16-byte header then
// its payload:
//   0  magic "KLOG" (4 bytes)          4  payload size u32
//   8  checksum u64 (XXH3-64 of the payload, seeded with its size)
// A reader takes frames until the bytes end; a frame cut short (a write the process did not
// finish) or one that fails its magic or checksum ends the intact prefix, and is reported.
//
// Thread safety: pure functions over values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace keel::state {

inline constexpr size_t kEntryHeaderBytes = 32;
inline constexpr size_t kFrameHeaderBytes = 16;
// A log entry holds at most this many bytes (its size field is 32 bits).
inline constexpr size_t kMaxFramePayloadBytes = size_t{1} << 30;

// The header of an entry file holding `payload`.
[[nodiscard]] std::string encode_entry_header(std::string_view payload);
// The payload of a whole entry file's bytes (a view into `file`): Corrupt naming `what` and the
// reason — too short for a header, another magic, a damaged header, truncated (fewer bytes than
// the header announces), trailing bytes, a payload checksum mismatch.
[[nodiscard]] Result<std::string_view> decode_entry(std::string_view file, const std::string& what);

// One log frame holding `payload` (at most kMaxFramePayloadBytes).
[[nodiscard]] std::string encode_frame(std::string_view payload);

struct FrameScan {
  std::vector<std::string_view> payloads;  // the intact frames, in order (views into the bytes)
  size_t intact_bytes = 0;                 // the bytes those frames take, from the start
  std::string problem;  // "" when every byte belongs to an intact frame, else why the rest is not
};
// The frames of a log file's bytes.
[[nodiscard]] FrameScan scan_frames(std::string_view bytes);

}  // namespace keel::state
