// The context-parallel ring's messages: packing and checked views (see cp_message.h).
#include "model/cp_message.h"

#include <cstring>
#include <iterator>
#include <string>

#include "core/check.h"
#include "core/index_cast.h"

namespace keel::model {
namespace {

constexpr uint32_t kMagic = 0x3150434B;  // "KCP1"
constexpr uint32_t kKindKv = 1, kKindState = 2, kKindTokens = 3;
constexpr int64_t kMaxTokens = 1 << 20;
constexpr size_t kHeaderBytes = 64;

struct Header {
  uint32_t magic = kMagic;
  uint32_t version = kCpMessageVersion;
  uint32_t kind = 0;
  int32_t layer = 0;
  int64_t n_rows = 0;  // KV: positions; state: query rows
  int64_t a = 0;       // KV: blocks; state: heads
  int64_t b = 0;       // KV: row bytes; state: head_dim
  int64_t c = 0;       // KV: kv_dim
  uint32_t dtype = 0;  // KV: the rows' DType
  int32_t block_size = 0;
};
static_assert(sizeof(Header) <= kHeaderBytes);

size_t positions_bytes(int64_t n) { return (sz(n) * sizeof(int32_t) + 63) / 64 * 64; }

std::shared_ptr<std::vector<std::byte>> start(const Header& h, std::span<const int32_t> positions,
                                              size_t payload) {
  auto msg = std::make_shared<std::vector<std::byte>>(
      kHeaderBytes + positions_bytes(std::ssize(positions)) + payload);
  std::memcpy(msg->data(), &h, sizeof(h));
  if (!positions.empty()) {
    std::memcpy(msg->data() + kHeaderBytes, positions.data(), positions.size() * sizeof(int32_t));
  }
  return msg;
}

Status mismatch(const char* what, int64_t got, int64_t want) {
  return Status::corrupt(std::string("context-parallel message: ") + what + " is " +
                         std::to_string(got) + ", expected " + std::to_string(want));
}

// The header of `msg`, checked for magic, version, kind and layer.
Result<Header> read_header(const CpMessage& msg, uint32_t kind, int64_t layer) {
  if (!msg || msg->size() < kHeaderBytes) {
    return Status::corrupt("context-parallel message shorter than its header");
  }
  Header h;
  std::memcpy(&h, msg->data(), sizeof(h));
  if (h.magic != kMagic) return Status::corrupt("context-parallel message: bad magic");
  if (h.version != kCpMessageVersion) return mismatch("version", h.version, kCpMessageVersion);
  if (h.kind != kind) return mismatch("kind", h.kind, kind);
  if (h.layer != layer) return mismatch("layer", h.layer, layer);
  if (h.n_rows < 0 || h.a < 0 || h.b < 0) return Status::corrupt("context-parallel message: sizes");
  return h;
}

}  // namespace

CpMessage pack_kv_shard(const KvStorage& kv, int64_t layer, std::span<const int32_t> table,
                        std::span<const int32_t> positions) {
  const KvLayout& layout = kv.layout();
  const int64_t bs = layout.block_size;
  const int64_t n_blocks = (std::ssize(positions) + bs - 1) / bs;
  KEEL_CHECK(n_blocks <= std::ssize(table));
  const size_t half = sz(bs) * layout.row_bytes();
  Header h;
  h.kind = kKindKv;
  h.layer = static_cast<int32_t>(layer);
  h.n_rows = std::ssize(positions);
  h.a = n_blocks;
  h.b = static_cast<int64_t>(layout.row_bytes());
  h.c = layout.kv_dim;
  h.dtype = static_cast<uint32_t>(layout.dtype);
  h.block_size = layout.block_size;
  auto msg = start(h, positions, sz(n_blocks) * 2 * half);
  std::byte* out = msg->data() + kHeaderBytes + positions_bytes(std::ssize(positions));
  for (int64_t j = 0; j < n_blocks; ++j) {
    std::memcpy(out, kv.k_row(table[sz(j)], layer, 0), half);
    std::memcpy(out + half, kv.v_row(table[sz(j)], layer, 0), half);
    out += 2 * half;
  }
  return msg;
}

Result<CpKvShard> view_kv_shard(const CpMessage& msg, const KvLayout& layout, int64_t layer) {
  KEEL_ASSIGN_OR_RETURN(const Header h, read_header(msg, kKindKv, layer));
  if (h.dtype != static_cast<uint32_t>(layout.dtype)) {
    return mismatch("dtype", h.dtype, static_cast<int64_t>(layout.dtype));
  }
  if (h.block_size != layout.block_size)
    return mismatch("block size", h.block_size, layout.block_size);
  if (h.c != layout.kv_dim) return mismatch("kv_dim", h.c, layout.kv_dim);
  const auto row = static_cast<int64_t>(layout.row_bytes());
  if (h.b != row) return mismatch("row bytes", h.b, row);
  const int64_t want_blocks = (h.n_rows + layout.block_size - 1) / layout.block_size;
  if (h.a != want_blocks) return mismatch("blocks", h.a, want_blocks);
  const size_t half = sz(layout.block_size) * layout.row_bytes();
  const size_t want = kHeaderBytes + positions_bytes(h.n_rows) + sz(h.a) * 2 * half;
  if (msg->size() != want) return mismatch("size", std::ssize(*msg), static_cast<int64_t>(want));
  CpKvShard shard;
  shard.positions = {reinterpret_cast<const int32_t*>(msg->data() + kHeaderBytes), sz(h.n_rows)};
  for (size_t i = 1; i < shard.positions.size(); ++i) {
    if (shard.positions[i] <= shard.positions[i - 1]) {
      return Status::corrupt("context-parallel message: positions not ascending");
    }
  }
  shard.kv.base = msg->data() + kHeaderBytes + positions_bytes(h.n_rows);
  shard.kv.block_stride = 2 * half;
  shard.kv.v_offset = half;
  shard.kv.block_size = layout.block_size;
  shard.kv.kv_dim = layout.kv_dim;
  shard.kv.dtype = layout.dtype;
  shard.n_blocks = static_cast<int32_t>(h.a);
  return shard;
}

CpMessage pack_attention_state(int64_t layer, const CpStateView& state) {
  Header h;
  h.kind = kKindState;
  h.layer = static_cast<int32_t>(layer);
  h.n_rows = state.n_q;
  h.a = state.n_heads;
  h.b = state.head_dim;
  const size_t acc = sz(state.n_q * state.n_heads * state.head_dim) * sizeof(float);
  const size_t ml = sz(state.n_q * state.n_heads) * sizeof(float);
  auto msg = start(h, {}, acc + 2 * ml);
  std::byte* out = msg->data() + kHeaderBytes;
  std::memcpy(out, state.acc, acc);
  std::memcpy(out + acc, state.m, ml);
  std::memcpy(out + acc + ml, state.l, ml);
  return msg;
}

Result<CpStateView> view_attention_state(const CpMessage& msg, int64_t layer, int64_t n_q,
                                         int64_t n_heads, int64_t head_dim) {
  KEEL_ASSIGN_OR_RETURN(const Header h, read_header(msg, kKindState, layer));
  if (h.n_rows != n_q) return mismatch("query rows", h.n_rows, n_q);
  if (h.a != n_heads) return mismatch("heads", h.a, n_heads);
  if (h.b != head_dim) return mismatch("head_dim", h.b, head_dim);
  const size_t acc = sz(n_q * n_heads * head_dim) * sizeof(float);
  const size_t ml = sz(n_q * n_heads) * sizeof(float);
  if (msg->size() != kHeaderBytes + acc + 2 * ml) {
    return mismatch("size", std::ssize(*msg), static_cast<int64_t>(kHeaderBytes + acc + 2 * ml));
  }
  const std::byte* p = msg->data() + kHeaderBytes;
  CpStateView v;
  v.n_q = n_q;
  v.n_heads = n_heads;
  v.head_dim = head_dim;
  v.acc = reinterpret_cast<const float*>(p);
  v.m = reinterpret_cast<const float*>(p + acc);
  v.l = reinterpret_cast<const float*>(p + acc + ml);
  return v;
}

CpMessage pack_tokens(std::span<const int32_t> tokens) {
  Header h;
  h.kind = kKindTokens;
  h.n_rows = std::ssize(tokens);
  return start(h, tokens, 0);
}

Result<std::vector<int32_t>> view_tokens(const CpMessage& msg) {
  KEEL_ASSIGN_OR_RETURN(const Header h, read_header(msg, kKindTokens, 0));
  if (h.n_rows > kMaxTokens) return mismatch("tokens", h.n_rows, kMaxTokens);
  const size_t want = kHeaderBytes + positions_bytes(h.n_rows);
  if (msg->size() != want) return mismatch("size", std::ssize(*msg), static_cast<int64_t>(want));
  const auto* p = reinterpret_cast<const int32_t*>(msg->data() + kHeaderBytes);
  return std::vector<int32_t>(p, p + h.n_rows);
}

}  // namespace keel::model
