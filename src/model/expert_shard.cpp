// ExpertShard: validation, the byte ranges a shard's load skips (expert tensors recognised by
// name, sliced per expert; with experts_only every other matrix too), and emptying the views of
// what the shard does not keep.
#include "model/expert_shard.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <string_view>

#include "model/weights.h"

namespace keel::model {
namespace {

constexpr int32_t kMaxExpertShards = 64;

// The expert a tensor holds: kAll for a 3-D tensor of every expert, an index for a per-expert
// tensor, nullopt for a tensor that is not an expert's.
constexpr int64_t kAll = -1;

// Consumes a run of decimal digits at the front of `s` (at most 9, so it fits).
std::optional<int64_t> take_number(std::string_view& s) {
  size_t n = 0;
  while (n < s.size() && n < 9 && std::isdigit(static_cast<unsigned char>(s[n]))) ++n;
  if (n == 0) return std::nullopt;
  const int64_t v = std::stoll(std::string(s.substr(0, n)));
  s.remove_prefix(n);
  return v;
}

// An expert tensor's layer and expert.
struct ExpertTensor {
  int64_t layer = 0;
  int64_t expert = kAll;
};

// blk.N.ffn_{gate,up,down}_exps.weight and blk.N.ffn_gate_up_exps.weight: {N, kAll};
// blk.N.ffn_{gate,up,down}.E.weight: {N, E}; anything else: nullopt.
std::optional<ExpertTensor> expert_of(std::string_view name) {
  if (!name.starts_with("blk.")) return std::nullopt;
  name.remove_prefix(4);
  const std::optional<int64_t> layer = take_number(name);
  if (!layer || !name.starts_with(".ffn_")) return std::nullopt;
  name.remove_prefix(5);
  for (std::string_view k : {"gate_exps", "up_exps", "down_exps", "gate_up_exps"}) {
    if (name.size() == k.size() + 7 && name.starts_with(k) && name.ends_with(".weight")) {
      return ExpertTensor{*layer, kAll};
    }
  }
  for (std::string_view k : {"gate.", "up.", "down."}) {
    if (!name.starts_with(k)) continue;
    name.remove_prefix(k.size());
    const std::optional<int64_t> e = take_number(name);
    if (e && name == ".weight") return ExpertTensor{*layer, *e};
    return std::nullopt;
  }
  return std::nullopt;
}

// The experts per layer: a 3-D expert tensor's shape[2], or one more than the largest E of the
// per-expert tensors (0 without experts).
int64_t count_experts(const std::vector<gguf::TensorInfo>& tensors) {
  int64_t n = 0;
  for (const gguf::TensorInfo& t : tensors) {
    const std::optional<ExpertTensor> x = expert_of(t.name);
    if (!x) continue;
    n = std::max(n, x->expert == kAll ? (t.shape.size() >= 3 ? t.shape[2] : 1) : x->expert + 1);
  }
  return n;
}

// Two or more dimensions once trailing 1s are dropped (as TensorLoader reads shapes): a matrix,
// never a vector that the loader copies (those are always read).
bool is_matrix(const gguf::TensorInfo& t) {
  size_t dims = t.shape.size();
  while (dims > 1 && t.shape[dims - 1] == 1) --dims;
  return dims >= 2;
}

}  // namespace

Status ExpertShard::validate() const {
  if (count < 1 || count > kMaxExpertShards) {
    return Status::invalid_argument("expert shard count " + std::to_string(count) +
                                    " is out of range [1, " + std::to_string(kMaxExpertShards) +
                                    "]");
  }
  if (index < 0 || index >= count) {
    return Status::invalid_argument("expert shard index " + std::to_string(index) +
                                    " is out of range [0, " + std::to_string(count) + ")");
  }
  if (experts_only && index == 0) {
    return Status::invalid_argument(
        "expert shard 0 is the leader and holds the attention: experts_only needs index > 0");
  }
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (replicas[i].first < 0 || replicas[i].second < 0 ||
        (i > 0 && !(replicas[i - 1] < replicas[i]))) {
      return Status::invalid_argument(
          "expert shard replicas must be non-negative (layer, expert) pairs, sorted and distinct");
    }
  }
  return Status();
}

std::vector<gguf::ByteRange> expert_shard_skips(const std::vector<gguf::TensorInfo>& tensors,
                                                const ExpertShard& shard) {
  if (shard.whole()) return {};
  // Kept bytes are subtracted at the end, so that a tensor aliasing another's bytes (GGUF allows
  // it) is read whenever any tensor viewing those bytes is kept.
  std::vector<gguf::ByteRange> skip, keep;
  const int64_t n_expert = count_experts(tensors);
  for (const gguf::TensorInfo& t : tensors) {
    const std::optional<ExpertTensor> x = expert_of(t.name);
    const uint64_t n = t.shape.size() >= 3 && t.shape[2] > 0 ? uint64_t(t.shape[2]) : 1;
    if (x && x->expert == kAll && t.num_bytes % n == 0) {
      const uint64_t slice = t.num_bytes / n;
      for (uint64_t e = 0; e < n; ++e) {
        (shard.holds(x->layer, int64_t(e), int64_t(n)) ? keep : skip)
            .push_back({t.offset + e * slice, slice});
      }
    } else if (x && x->expert != kAll) {
      (shard.holds(x->layer, x->expert, n_expert) ? keep : skip).push_back({t.offset, t.num_bytes});
    } else if (!x && shard.experts_only && is_matrix(t)) {
      skip.push_back({t.offset, t.num_bytes});
    } else {
      keep.push_back({t.offset, t.num_bytes});
    }
  }
  return gguf::subtract_ranges(skip, keep);
}

void apply_expert_shard(Weights& w, const ExpertShard& shard) {
  if (shard.whole()) return;
  for (size_t il = 0; il < w.layers.size(); ++il) {
    LayerWeights& l = w.layers[il];
    for (auto* bank : {&l.moe.gate, &l.moe.up, &l.moe.down}) {
      for (size_t e = 0; e < bank->size(); ++e) {
        if (!shard.holds(static_cast<int64_t>(il), static_cast<int64_t>(e),
                         static_cast<int64_t>(bank->size()))) {
          (*bank)[e] = kernels::Matrix{};
        }
      }
    }
    if (!shard.experts_only) continue;
    // The shared expert goes too (MoeWeights::has_shared() is then false): the leader runs it.
    for (kernels::Matrix* m :
         {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.moe.router,
          &l.moe.shared_gate, &l.moe.shared_up, &l.moe.shared_down}) {
      *m = kernels::Matrix{};
    }
  }
  if (shard.experts_only) {
    w.token_embd = kernels::Matrix{};
    w.output = kernels::Matrix{};
  }
}

}  // namespace keel::model
