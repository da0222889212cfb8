// The expert-parallel frames' codec: fixed little-endian fields (this host's order; the frames
// stay on one host, in shared memory), sizes checked against the frame on decode.
#include "ep/expert_frame.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace keel::ep {
namespace {

static_assert(std::endian::native == std::endian::little, "frames are little-endian");

constexpr size_t kHelloBytes = 8 + 9 * 4;
constexpr size_t kWorkHeaderBytes = 16;
constexpr size_t kOutputsHeaderBytes = 16;
constexpr size_t kMaxErrorMessage = 4096;

// Appends trivially copyable values at a cursor.
struct Writer {
  std::byte* p;
  template <typename T>
  void put(T v) {
    std::memcpy(p, &v, sizeof(T));
    p += sizeof(T);
  }
};

// Reads them back with a bound.
struct Reader {
  const std::byte* p;
  const std::byte* end;
  bool ok = true;
  template <typename T>
  T get() {
    T v{};
    if (end - p < static_cast<ptrdiff_t>(sizeof(T))) {
      ok = false;
      return v;
    }
    std::memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    return v;
  }
};

Result<size_t> put_header(FrameKind kind, uint32_t seq, size_t body, std::span<std::byte> out) {
  if (out.size() < kFrameHeaderBytes + body || body > UINT32_MAX) {
    return Status::invalid_argument("expert frame of " + std::to_string(kFrameHeaderBytes + body) +
                                    " bytes does not fit a " + std::to_string(out.size()) +
                                    "-byte mailbox");
  }
  Writer w{out.data()};
  w.put(kFrameMagic);
  w.put(kFrameVersion);
  w.put(static_cast<uint16_t>(kind));
  w.put(seq);
  w.put(static_cast<uint32_t>(body));
  return kFrameHeaderBytes + body;
}

bool known_kind(uint16_t k) {
  switch (static_cast<FrameKind>(k)) {
    case FrameKind::kHello:
    case FrameKind::kWork:
    case FrameKind::kBye:
    case FrameKind::kReady:
    case FrameKind::kOutputs:
    case FrameKind::kError:
      return true;
  }
  return false;
}

Status want_kind(const Frame& f, FrameKind k, const char* what) {
  if (f.kind == k) return Status();
  return Status::corrupt(std::string("expert frame: expected ") + what + ", got kind " +
                         std::to_string(static_cast<int>(f.kind)));
}

}  // namespace

size_t work_frame_bytes(int64_t n_rows, int64_t n_slots, int64_t n_embd) {
  return kFrameHeaderBytes + kWorkHeaderBytes + static_cast<size_t>(n_rows * n_embd) * 4 +
         static_cast<size_t>(n_slots) * 8;
}

size_t outputs_frame_bytes(int64_t n_slots, int64_t n_embd) {
  return kFrameHeaderBytes + kOutputsHeaderBytes + static_cast<size_t>(n_slots * n_embd) * 4;
}

Result<size_t> encode_hello(const EpHello& h, uint32_t seq, std::span<std::byte> out) {
  KEEL_ASSIGN_OR_RETURN(
      size_t n, put_header(FrameKind::kHello, seq, kHelloBytes + h.replicas.size() * 8, out));
  Writer w{out.data() + kFrameHeaderBytes};
  w.put(h.model_bytes);
  for (int32_t v : {h.n_layer, h.n_embd, h.n_expert, h.n_expert_used, h.n_ff_exp, h.shard_index,
                    h.shard_count, h.max_rows, static_cast<int32_t>(h.replicas.size())}) {
    w.put(v);
  }
  for (const auto& [layer, expert] : h.replicas) {
    w.put(layer);
    w.put(expert);
  }
  return n;
}

Result<size_t> encode_work(const model::ExpertWork& wk, int32_t n_embd, uint32_t seq,
                           std::span<std::byte> out) {
  const size_t total = work_frame_bytes(wk.n_rows, wk.n_slots, n_embd);
  KEEL_ASSIGN_OR_RETURN(size_t n,
                        put_header(FrameKind::kWork, seq, total - kFrameHeaderBytes, out));
  Writer w{out.data() + kFrameHeaderBytes};
  w.put(static_cast<int32_t>(wk.layer));
  w.put(static_cast<int32_t>(wk.n_rows));
  w.put(static_cast<int32_t>(wk.n_slots));
  w.put(n_embd);
  const auto row_bytes = static_cast<size_t>(wk.n_rows * n_embd) * 4;
  std::memcpy(w.p, wk.rows, row_bytes);
  w.p += row_bytes;
  std::memcpy(w.p, wk.slot_row, static_cast<size_t>(wk.n_slots) * 4);
  w.p += static_cast<size_t>(wk.n_slots) * 4;
  std::memcpy(w.p, wk.slot_expert, static_cast<size_t>(wk.n_slots) * 4);
  return n;
}

Result<size_t> encode_bare(FrameKind kind, uint32_t seq, std::span<std::byte> out) {
  return put_header(kind, seq, 0, out);
}

Result<size_t> encode_error(const Status& s, uint32_t seq, std::span<std::byte> out) {
  const std::string msg = s.message().substr(0, kMaxErrorMessage);
  KEEL_ASSIGN_OR_RETURN(size_t n, put_header(FrameKind::kError, seq, 8 + msg.size(), out));
  Writer w{out.data() + kFrameHeaderBytes};
  w.put(static_cast<int32_t>(s.code()));
  w.put(static_cast<uint32_t>(msg.size()));
  std::memcpy(w.p, msg.data(), msg.size());
  return n;
}

Result<size_t> encode_outputs(int32_t n_slots, int32_t n_embd, uint64_t compute_ns, uint32_t seq,
                              std::span<std::byte> out) {
  const size_t total = outputs_frame_bytes(n_slots, n_embd);
  KEEL_ASSIGN_OR_RETURN(size_t n,
                        put_header(FrameKind::kOutputs, seq, total - kFrameHeaderBytes, out));
  Writer w{out.data() + kFrameHeaderBytes};
  w.put(n_slots);
  w.put(n_embd);
  w.put(compute_ns);
  return n;
}

float* outputs_area(std::span<std::byte> out) {
  return reinterpret_cast<float*>(out.data() + kFrameHeaderBytes + kOutputsHeaderBytes);
}

Result<Frame> decode_frame(std::span<const std::byte> bytes) {
  Reader r{bytes.data(), bytes.data() + bytes.size()};
  const auto magic = r.get<uint32_t>();
  const auto version = r.get<uint16_t>();
  const auto kind = r.get<uint16_t>();
  const auto seq = r.get<uint32_t>();
  const auto body = r.get<uint32_t>();
  if (!r.ok || magic != kFrameMagic) return Status::corrupt("expert frame: bad magic");
  if (version != kFrameVersion) {
    return Status::unsupported("expert frame version " + std::to_string(version) +
                               " (this keel speaks " + std::to_string(kFrameVersion) + ")");
  }
  if (!known_kind(kind)) {
    return Status::corrupt("expert frame: unknown kind " + std::to_string(kind));
  }
  if (body > bytes.size() - kFrameHeaderBytes) {
    return Status::corrupt("expert frame: body of " + std::to_string(body) +
                           " bytes runs past the mailbox");
  }
  return Frame{static_cast<FrameKind>(kind), seq, bytes.subspan(kFrameHeaderBytes, body)};
}

Result<EpHello> decode_hello(const Frame& f) {
  KEEL_TRY(want_kind(f, FrameKind::kHello, "hello"));
  Reader r{f.body.data(), f.body.data() + f.body.size()};
  EpHello h;
  h.model_bytes = r.get<uint64_t>();
  for (int32_t* v : {&h.n_layer, &h.n_embd, &h.n_expert, &h.n_expert_used, &h.n_ff_exp,
                     &h.shard_index, &h.shard_count, &h.max_rows}) {
    *v = r.get<int32_t>();
  }
  const auto n_replicas = r.get<int32_t>();
  if (!r.ok) return Status::corrupt("expert frame: short hello");
  if (n_replicas < 0 ||
      static_cast<int64_t>(n_replicas) > int64_t{h.n_layer} * std::max(h.n_expert, 0) ||
      f.body.size() != kHelloBytes + static_cast<size_t>(n_replicas) * 8) {
    return Status::corrupt("expert frame: malformed hello (" + std::to_string(n_replicas) +
                           " replicas)");
  }
  h.replicas.resize(static_cast<size_t>(n_replicas));
  for (auto& [layer, expert] : h.replicas) {
    layer = r.get<int32_t>();
    expert = r.get<int32_t>();
  }
  return h;
}

Result<WorkView> decode_work(const Frame& f) {
  KEEL_TRY(want_kind(f, FrameKind::kWork, "work"));
  Reader r{f.body.data(), f.body.data() + f.body.size()};
  WorkView v;
  v.layer = r.get<int32_t>();
  v.n_rows = r.get<int32_t>();
  v.n_slots = r.get<int32_t>();
  v.n_embd = r.get<int32_t>();
  if (!r.ok || v.layer < 0 || v.n_rows < 0 || v.n_slots < 0 || v.n_embd <= 0 ||
      f.body.size() != work_frame_bytes(v.n_rows, v.n_slots, v.n_embd) - kFrameHeaderBytes) {
    return Status::corrupt("expert frame: malformed work");
  }
  const std::byte* p = f.body.data() + kWorkHeaderBytes;
  v.rows = reinterpret_cast<const float*>(p);
  p += static_cast<size_t>(v.n_rows) * static_cast<size_t>(v.n_embd) * 4;
  v.slot_row = reinterpret_cast<const int32_t*>(p);
  v.slot_expert = v.slot_row + v.n_slots;
  for (int32_t i = 0; i < v.n_slots; ++i) {
    if (v.slot_row[i] < 0 || v.slot_row[i] >= v.n_rows) {
      return Status::corrupt("expert frame: slot " + std::to_string(i) + " names row " +
                             std::to_string(v.slot_row[i]) + " of " + std::to_string(v.n_rows));
    }
  }
  return v;
}

Result<OutputsView> decode_outputs(const Frame& f) {
  KEEL_TRY(want_kind(f, FrameKind::kOutputs, "outputs"));
  Reader r{f.body.data(), f.body.data() + f.body.size()};
  OutputsView v;
  v.n_slots = r.get<int32_t>();
  v.n_embd = r.get<int32_t>();
  v.compute_ns = r.get<uint64_t>();
  if (!r.ok || v.n_slots < 0 || v.n_embd <= 0 ||
      f.body.size() != outputs_frame_bytes(v.n_slots, v.n_embd) - kFrameHeaderBytes) {
    return Status::corrupt("expert frame: malformed outputs");
  }
  v.ys = reinterpret_cast<const float*>(f.body.data() + kOutputsHeaderBytes);
  return v;
}

Status decode_error(const Frame& f) {
  KEEL_TRY(want_kind(f, FrameKind::kError, "error"));
  Reader r{f.body.data(), f.body.data() + f.body.size()};
  const auto code = r.get<int32_t>();
  const auto len = r.get<uint32_t>();
  if (!r.ok || len != f.body.size() - 8 || code <= 0 ||
      code > static_cast<int32_t>(StatusCode::kInternal)) {
    return Status::corrupt("expert frame: malformed error");
  }
  return {static_cast<StatusCode>(code),
          std::string_view(reinterpret_cast<const char*>(f.body.data() + 8), len)};
}

}  // namespace keel::ep
