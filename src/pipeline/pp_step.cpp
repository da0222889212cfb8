// PpStep's codec (layout in pp_step.h). Written for little-endian hosts (x86-64, what keel
// targets); the magic check would catch a big-endian peer.
#include "pipeline/pp_step.h"

#include <cstring>
#include <string>

namespace keel::pipeline {
namespace {

class Writer {
 public:
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  template <typename T>
  void put_all(std::span<const T> v) {
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    out_.insert(out_.end(), p, p + v.size_bytes());
  }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  template <typename T>
  bool get(T* v) {
    if (b_.size() - at_ < sizeof(T)) return false;
    std::memcpy(v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  template <typename T>
  bool get_all(size_t n, std::vector<T>* v) {
    if ((b_.size() - at_) / sizeof(T) < n) return false;
    v->resize(n);
    if (n > 0) std::memcpy(v->data(), b_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return true;
  }
  [[nodiscard]] bool done() const { return at_ == b_.size(); }

 private:
  std::span<const uint8_t> b_;
  size_t at_ = 0;
};

Status bad(const std::string& what) { return Status::invalid_argument("pp step: " + what); }

}  // namespace

std::vector<uint8_t> encode_pp_step(const engine::PipelineStep& step) {
  Writer w;
  w.put(kPpStepMagic);
  w.put(kPpStepVersion);
  w.put(uint16_t{0});
  w.put(static_cast<uint32_t>(step.block_copies.size()));
  for (const engine::BlockCopy& c : step.block_copies) {
    w.put(c.first);
    w.put(c.second);
  }
  const model::Batch& b = *step.batch;
  w.put(static_cast<uint32_t>(b.size()));
  w.put_all(std::span<const int32_t>(b.tokens));
  w.put_all(std::span<const int32_t>(b.positions));
  w.put_all(std::span<const int32_t>(b.seq_index));
  w.put_all(std::span<const uint8_t>(b.logits));
  w.put(static_cast<uint32_t>(b.seqs.size()));
  for (const model::BatchSeq& s : b.seqs) {
    w.put(static_cast<uint32_t>(s.block_table.size()));
    w.put_all(std::span<const int32_t>(s.block_table));
  }
  w.put(static_cast<uint32_t>(step.residual.size()));
  w.put_all(step.residual);
  return w.take();
}

Result<PpStep> decode_pp_step(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  uint32_t magic = 0, n = 0;
  uint16_t version = 0, reserved = 0;
  if (!r.get(&magic) || !r.get(&version) || !r.get(&reserved)) return bad("truncated header");
  if (magic != kPpStepMagic) return bad("bad magic");
  if (version != kPpStepVersion) return bad("unknown version " + std::to_string(version));
  PpStep step;
  if (!r.get(&n) || n > kPpMaxCopies) return bad("bad copy count");
  step.block_copies.resize(n);
  for (engine::BlockCopy& c : step.block_copies) {
    if (!r.get(&c.first) || !r.get(&c.second)) return bad("truncated copies");
  }
  model::Batch& b = step.batch;
  if (!r.get(&n) || n > kPpMaxTokens) return bad("bad token count");
  if (!r.get_all(n, &b.tokens) || !r.get_all(n, &b.positions) || !r.get_all(n, &b.seq_index) ||
      !r.get_all(n, &b.logits)) {
    return bad("truncated tokens");
  }
  if (!r.get(&n) || n > kPpMaxSeqs) return bad("bad sequence count");
  b.seqs.resize(n);
  for (model::BatchSeq& s : b.seqs) {
    uint32_t blocks = 0;
    if (!r.get(&blocks) || blocks > kPpMaxBlocksPerSeq) return bad("bad block table length");
    if (!r.get_all(blocks, &s.block_table)) return bad("truncated block table");
  }
  if (!r.get(&n) || n > kPpMaxResidualFloats) return bad("bad residual length");
  if (!r.get_all(n, &step.residual)) return bad("truncated residual");
  if (!r.done()) return bad("trailing bytes");
  return step;
}

std::vector<uint8_t> encode_floats(std::span<const float> values) {
  std::vector<uint8_t> out(values.size_bytes());
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

Result<std::vector<float>> decode_floats(std::span<const uint8_t> bytes) {
  if (bytes.size() % sizeof(float) != 0) return bad("float payload of odd length");
  std::vector<float> out(bytes.size() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

}  // namespace keel::pipeline
