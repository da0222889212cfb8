// KvEventBatch ⇄ msgpack (see kv_event_codec.h). msgpack-cxx parses into an object tree under
// size limits derived from the input (no element count may exceed the byte count, so a forged
// length cannot allocate more than the input justifies); its exceptions stay inside this file.
// Thread safety: pure functions.
#define MSGPACK_NO_BOOST 1
#include "cluster/kv_events/kv_event_codec.h"

#include <msgpack.hpp>

#include <bit>
#include <exception>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

namespace keel::cluster {
namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

void pack_str(Packer& pk, std::string_view s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

// msgspec writes a Python float as float64 always; msgpack-cxx's pack_double would write an
// integral value as an integer, so the 9 bytes are written here.
void pack_float64(msgpack::sbuffer& buf, double v) {
  const auto bits = std::bit_cast<uint64_t>(v);
  char b[9];
  b[0] = static_cast<char>(0xcb);
  for (int i = 0; i < 8; ++i) b[1 + i] = static_cast<char>((bits >> (56 - 8 * i)) & 0xff);
  buf.write(b, sizeof(b));
}

void pack_hashes(Packer& pk, const std::vector<uint64_t>& hashes) {
  pk.pack_array(static_cast<uint32_t>(hashes.size()));
  for (uint64_t h : hashes) pk.pack_uint64(h);
}

template <typename T, typename PackValue>
void pack_optional(Packer& pk, const std::optional<T>& v, PackValue pack_value) {
  if (v.has_value()) {
    pack_value(*v);
  } else {
    pk.pack_nil();
  }
}

void pack_event(Packer& pk, const BlockStored& e) {
  pk.pack_array(7);
  pack_str(pk, "BlockStored");
  pack_hashes(pk, e.block_hashes);
  pack_optional(pk, e.parent_block_hash, [&](uint64_t h) { pk.pack_uint64(h); });
  pk.pack_array(static_cast<uint32_t>(e.token_ids.size()));
  for (int32_t t : e.token_ids) pk.pack_int32(t);
  pk.pack_int32(e.block_size);
  pack_optional(pk, e.lora_id, [&](int64_t id) { pk.pack_int64(id); });
  pack_optional(pk, e.medium, [&](const std::string& m) { pack_str(pk, m); });
}

void pack_event(Packer& pk, const BlockRemoved& e) {
  pk.pack_array(3);
  pack_str(pk, "BlockRemoved");
  pack_hashes(pk, e.block_hashes);
  pack_optional(pk, e.medium, [&](const std::string& m) { pack_str(pk, m); });
}

void pack_event(Packer& pk, const AllBlocksCleared&) {
  pk.pack_array(1);
  pack_str(pk, "AllBlocksCleared");
}

// --- decoding: each reader checks one field and names it on failure -------------------------

Status bad(std::string_view what) {
  return Status::invalid_argument("kv event batch: " + std::string(what));
}

Result<int64_t> read_int(const msgpack::object& o, std::string_view field, int64_t lo, int64_t hi) {
  int64_t v = 0;
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    if (o.via.u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return bad(std::string(field) + " out of range");
    }
    v = static_cast<int64_t>(o.via.u64);
  } else if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    v = o.via.i64;
  } else {
    return bad(std::string(field) + " is not an integer");
  }
  if (v < lo || v > hi) return bad(std::string(field) + " out of range");
  return v;
}

// A block hash: any 64-bit integer (negative ones as their two's complement).
Result<uint64_t> read_hash(const msgpack::object& o, std::string_view field) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) return o.via.u64;
  if (o.type == msgpack::type::NEGATIVE_INTEGER) return static_cast<uint64_t>(o.via.i64);
  return bad(std::string(field) + " is not an integer");
}

Result<std::vector<uint64_t>> read_hashes(const msgpack::object& o, std::string_view field) {
  if (o.type != msgpack::type::ARRAY) return bad(std::string(field) + " is not an array");
  std::vector<uint64_t> out;
  out.reserve(o.via.array.size);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    KEEL_ASSIGN_OR_RETURN(uint64_t h, read_hash(o.via.array.ptr[i], field));
    out.push_back(h);
  }
  return out;
}

// Element i of `arr` when present and not nil (msgspec: a missing trailing optional is None).
const msgpack::object* optional_at(const msgpack::object_array& arr, uint32_t i) {
  if (i >= arr.size || arr.ptr[i].type == msgpack::type::NIL) return nullptr;
  return &arr.ptr[i];
}

Result<std::optional<std::string>> read_medium(const msgpack::object_array& arr, uint32_t i) {
  const msgpack::object* o = optional_at(arr, i);
  if (o == nullptr) return std::optional<std::string>();
  if (o->type != msgpack::type::STR) return bad("medium is not a string");
  return std::optional<std::string>(std::string(o->via.str.ptr, o->via.str.size));
}

Result<KvEvent> read_block_stored(const msgpack::object_array& a) {
  if (a.size < 5) return bad("BlockStored has " + std::to_string(a.size - 1) + " fields, want ≥ 4");
  BlockStored e;
  KEEL_ASSIGN_OR_RETURN(e.block_hashes, read_hashes(a.ptr[1], "BlockStored.block_hashes"));
  if (a.ptr[2].type != msgpack::type::NIL) {
    KEEL_ASSIGN_OR_RETURN(e.parent_block_hash,
                          read_hash(a.ptr[2], "BlockStored.parent_block_hash"));
  }
  const msgpack::object& tokens = a.ptr[3];
  if (tokens.type != msgpack::type::ARRAY) return bad("BlockStored.token_ids is not an array");
  e.token_ids.reserve(tokens.via.array.size);
  for (uint32_t i = 0; i < tokens.via.array.size; ++i) {
    KEEL_ASSIGN_OR_RETURN(int64_t t, read_int(tokens.via.array.ptr[i], "BlockStored.token_ids",
                                              std::numeric_limits<int32_t>::min(),
                                              std::numeric_limits<int32_t>::max()));
    e.token_ids.push_back(static_cast<int32_t>(t));
  }
  KEEL_ASSIGN_OR_RETURN(
      int64_t bs, read_int(a.ptr[4], "BlockStored.block_size", std::numeric_limits<int32_t>::min(),
                           std::numeric_limits<int32_t>::max()));
  e.block_size = static_cast<int32_t>(bs);
  if (const msgpack::object* lora = optional_at(a, 5)) {
    KEEL_ASSIGN_OR_RETURN(
        e.lora_id, read_int(*lora, "BlockStored.lora_id", std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max()));
  }
  KEEL_ASSIGN_OR_RETURN(e.medium, read_medium(a, 6));
  return KvEvent(std::move(e));
}

Result<KvEvent> read_event(const msgpack::object& o) {
  if (o.type != msgpack::type::ARRAY || o.via.array.size == 0) {
    return bad("an event is not a non-empty array");
  }
  const msgpack::object_array& a = o.via.array;
  if (a.ptr[0].type != msgpack::type::STR) return bad("an event's tag is not a string");
  const std::string_view tag(a.ptr[0].via.str.ptr, a.ptr[0].via.str.size);
  if (tag == "BlockStored") return read_block_stored(a);
  if (tag == "BlockRemoved") {
    if (a.size < 2) return bad("BlockRemoved has no block_hashes");
    BlockRemoved e;
    KEEL_ASSIGN_OR_RETURN(e.block_hashes, read_hashes(a.ptr[1], "BlockRemoved.block_hashes"));
    KEEL_ASSIGN_OR_RETURN(e.medium, read_medium(a, 2));
    return KvEvent(std::move(e));
  }
  if (tag == "AllBlocksCleared") return KvEvent(AllBlocksCleared{});
  return bad("unknown event tag '" + std::string(tag.substr(0, 64)) + "'");
}

Result<KvEventBatch> read_batch(const msgpack::object& o) {
  if (o.type != msgpack::type::ARRAY) return bad("not an array");
  const msgpack::object_array& a = o.via.array;
  if (a.size < 2) return bad("has " + std::to_string(a.size) + " fields, want ≥ 2");
  KvEventBatch batch;
  const msgpack::object& ts = a.ptr[0];
  if (ts.type == msgpack::type::FLOAT64 || ts.type == msgpack::type::FLOAT32) {
    batch.ts = ts.via.f64;
  } else if (ts.type == msgpack::type::POSITIVE_INTEGER) {
    batch.ts = static_cast<double>(ts.via.u64);
  } else if (ts.type == msgpack::type::NEGATIVE_INTEGER) {
    batch.ts = static_cast<double>(ts.via.i64);
  } else {
    return bad("ts is not a number");
  }
  const msgpack::object& events = a.ptr[1];
  if (events.type != msgpack::type::ARRAY) return bad("events is not an array");
  batch.events.reserve(events.via.array.size);
  for (uint32_t i = 0; i < events.via.array.size; ++i) {
    KEEL_ASSIGN_OR_RETURN(KvEvent e, read_event(events.via.array.ptr[i]));
    batch.events.push_back(std::move(e));
  }
  if (const msgpack::object* rank = optional_at(a, 2)) {
    KEEL_ASSIGN_OR_RETURN(int64_t r,
                          read_int(*rank, "data_parallel_rank", std::numeric_limits<int32_t>::min(),
                                   std::numeric_limits<int32_t>::max()));
    batch.data_parallel_rank = static_cast<int32_t>(r);
  }
  return batch;
}

}  // namespace

Bytes encode_kv_event_batch(const KvEventBatch& batch) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_array(batch.data_parallel_rank.has_value() ? 3 : 2);
  pack_float64(buf, batch.ts);
  pk.pack_array(static_cast<uint32_t>(batch.events.size()));
  for (const KvEvent& e : batch.events) {
    std::visit([&](const auto& ev) { pack_event(pk, ev); }, e);
  }
  if (batch.data_parallel_rank.has_value()) pk.pack_int32(*batch.data_parallel_rank);
  const auto* p = reinterpret_cast<const uint8_t*>(buf.data());
  return Bytes(p, p + buf.size());
}

Result<KvEventBatch> decode_kv_event_batch(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return bad("empty payload");
  // No count may exceed the input's size: every element takes at least one byte.
  const size_t n = bytes.size();
  const msgpack::unpack_limit limit(n, n, n, n, n, kMaxKvEventDepth);
  try {
    size_t offset = 0;
    const msgpack::object_handle handle = msgpack::unpack(
        reinterpret_cast<const char*>(bytes.data()), n, offset, nullptr, nullptr, limit);
    if (offset != n) return bad(std::to_string(n - offset) + " trailing bytes");
    return read_batch(handle.get());
  } catch (const msgpack::insufficient_bytes&) {
    return bad("truncated msgpack");
  } catch (const msgpack::depth_size_overflow&) {
    return bad("nested deeper than " + std::to_string(kMaxKvEventDepth));
  } catch (const std::exception& e) {
    return bad(std::string("malformed msgpack: ") + e.what());
  }
}

}  // namespace keel::cluster
