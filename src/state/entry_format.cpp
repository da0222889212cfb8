// Entry files and log frames of the state store (see entry_format.h).
#include "state/entry_format.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <cstring>

namespace keel::state {
namespace {

constexpr std::string_view kEntryMagic = "KEELST01";
constexpr std::string_view kFrameMagic = "KLOG";

void put_u64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_u64(std::string_view b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}
uint32_t get_u32(std::string_view b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

uint64_t checksum(std::string_view bytes, uint64_t seed = 0) {
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), seed);
}

}  // namespace

std::string encode_entry_header(std::string_view payload) {
  std::string h(kEntryMagic);
  put_u64(&h, payload.size());
  put_u64(&h, checksum(payload));
  put_u64(&h, checksum(h));
  return h;
}

Result<std::string_view> decode_entry(std::string_view file, const std::string& what) {
  auto bad = [&what](std::string_view why) {
    return Status::corrupt(fmt::format("{}: {}", what, why));
  };
  if (file.size() < kEntryHeaderBytes) {
    return bad(fmt::format("truncated: {} bytes, shorter than the {}-byte header", file.size(),
                           kEntryHeaderBytes));
  }
  if (file.substr(0, kEntryMagic.size()) != kEntryMagic) return bad("not a keel state entry");
  if (get_u64(file, 24) != checksum(file.substr(0, 24))) return bad("header checksum mismatch");
  const uint64_t size = get_u64(file, 8);
  const uint64_t have = file.size() - kEntryHeaderBytes;
  if (have < size) {
    return bad(fmt::format("truncated: {} of {} payload bytes", have, size));
  }
  if (have > size) return bad(fmt::format("{} bytes past the {}-byte payload", have - size, size));
  const std::string_view payload = file.substr(kEntryHeaderBytes);
  if (checksum(payload) != get_u64(file, 16)) return bad("payload checksum mismatch");
  return payload;
}

std::string encode_frame(std::string_view payload) {
  std::string f(kFrameMagic);
  put_u32(&f, static_cast<uint32_t>(payload.size()));
  put_u64(&f, checksum(payload, payload.size()));
  f.append(payload);
  return f;
}

FrameScan scan_frames(std::string_view bytes) {
  FrameScan scan;
  size_t at = 0;
  while (at < bytes.size()) {
    const std::string_view rest = bytes.substr(at);
    if (rest.size() < kFrameHeaderBytes) {
      scan.problem = fmt::format("a frame cut short at byte {}: {} of {} header bytes", at,
                                 rest.size(), kFrameHeaderBytes);
      break;
    }
    if (rest.substr(0, kFrameMagic.size()) != kFrameMagic) {
      scan.problem = fmt::format("no frame at byte {}", at);
      break;
    }
    const size_t size = get_u32(rest, 4);
    if (rest.size() - kFrameHeaderBytes < size) {
      scan.problem = fmt::format("a frame cut short at byte {}: {} of {} payload bytes", at,
                                 rest.size() - kFrameHeaderBytes, size);
      break;
    }
    const std::string_view payload = rest.substr(kFrameHeaderBytes, size);
    if (checksum(payload, size) != get_u64(rest, 8)) {
      scan.problem = fmt::format("checksum mismatch in the frame at byte {}", at);
      break;
    }
    scan.payloads.push_back(payload);
    at += kFrameHeaderBytes + size;
    scan.intact_bytes = at;
  }
  return scan;
}

}  // namespace keel::state
