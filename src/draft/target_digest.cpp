// target_digest (see target_digest.h).
#include "draft/target_digest.h"

#include <xxhash.h>

#include <cstdio>
#include <string_view>
#include <vector>

#include "kernels/weight_layout.h"

namespace keel::draft {
namespace {

constexpr int64_t kSampledRows = 64;

void update(XXH3_state_t* st, const std::vector<float>& v) {
  XXH3_64bits_update(st, v.data(), v.size() * sizeof(float));
}

void update_rows(XXH3_state_t* st, const kernels::Matrix& m) {
  std::vector<float> row(static_cast<size_t>(m.cols));
  const int64_t n = std::min(kSampledRows, m.rows);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = n > 1 ? i * (m.rows - 1) / (n - 1) : 0;
    kernels::dequantize_matrix_row(m, r, row.data());
    update(st, row);
  }
}

}  // namespace

uint64_t target_digest(const model::Model& model) {
  const model::HParams& hp = model.hparams();
  const model::Weights& w = model.weights();
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  constexpr std::string_view kTag = "keel-draft-target-v1";
  XXH3_64bits_update(st, kTag.data(), kTag.size());
  const std::string_view arch = model::arch_name(hp.arch);
  XXH3_64bits_update(st, arch.data(), arch.size());
  const int64_t shape[] = {hp.n_vocab, hp.n_embd, hp.n_layer, hp.n_head, hp.n_head_kv, hp.n_ff};
  XXH3_64bits_update(st, shape, sizeof(shape));
  update(st, w.output_norm);
  for (const model::LayerWeights& l : w.layers) {
    update(st, l.attn_norm);
    update(st, l.ffn_norm);
  }
  update_rows(st, w.token_embd);
  update_rows(st, w.output);
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

std::string digest_hex(uint64_t digest) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(digest));
  return buf;
}

}  // namespace keel::draft
