// Load-time grouping of quantized weights (model/group_weights.h): the matrices are marked
// grouped, a mapped file keeps the GGUF layout, and the forward pass gives bit-identical logits
// with and without grouping — prompt in one batch and token by token, tied embeddings included
// (the embedding lookup then reads rows back out of the grouped layout); and an expert shard's
// kept expert slices rewritten on their own, as a whole-tensor rewrite would.
#include "model/group_weights.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/weight_layout.h"
#include "model/expert_shard.h"
#include "model/random_model.h"
#include "support/test_support.h"
#include "test_util.h"
#include "tiny_model.h"

namespace keel::model::testing {
namespace {

const std::vector<int32_t> kPrompt = {1, 17, 5, 39, 22, 8, 30};

TinySpec quantized_spec(DType dtype, bool tied) {
  TinySpec s;
  s.matrix_dtype = dtype;
  s.tied_output = tied;
  s.n_ff = 64;                                // rows of 32
  if (dtype_info(dtype).block_size == 256) {  // K-quants need rows of 256
    s.n_embd = 256;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 256;
  }
  return s;
}

TEST(GroupWeightsTest, QuantizedMatricesAreGroupedAndLogitsUnchanged) {
  for (DType dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    for (bool tied : {false, true}) {
      const TinyModel m = write_tiny_model(quantized_spec(dtype, tied));
      ModelOptions plain;
      plain.group_weights = false;
      Runner grouped(m.path), rows(m.path, plain);
      ASSERT_TRUE(grouped.ok()) << grouped.status().to_string();
      ASSERT_TRUE(rows.ok());
      const Weights& gw = grouped.model().weights();
      // Q6_K has grouped kernels but is not grouped at load (kernels::grouped_layout_preferred).
      const auto g =
          dtype == DType::kQ6_K ? kernels::WeightLayout::kRows : kernels::WeightLayout::kGrouped16;
      EXPECT_EQ(gw.layers[0].wq.layout, g);
      EXPECT_EQ(gw.layers[1].w_down.layout, g);
      EXPECT_EQ(gw.output.layout, g);
      EXPECT_EQ(gw.token_embd.layout, tied ? g : kernels::WeightLayout::kRows);
      EXPECT_EQ(rows.model().weights().layers[0].wq.layout, kernels::WeightLayout::kRows);
      const auto want = rows.feed(kPrompt, 0);
      const auto got = grouped.feed(kPrompt, 0);
      ASSERT_EQ(want.size(), got.size());
      size_t finite = 0;
      for (float v : want) finite += std::isfinite(v) ? 1 : 0;
      EXPECT_EQ(finite, want.size()) << dtype_name(dtype) << ": logits must be finite to compare";
      EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
          << dtype_name(dtype) << (tied ? " tied" : "");
      const auto one = grouped.feed(kPrompt, 1, 0, true);
      EXPECT_EQ(0, std::memcmp(want.data(), one.data(), want.size() * sizeof(float)))
          << dtype_name(dtype) << (tied ? " tied" : "") << " token by token";
    }
  }
}

TEST(GroupWeightsTest, MappedFilesKeepTheGgufLayout) {
  const TinyModel m = write_tiny_model(quantized_spec(DType::kQ8_0, false));
  auto model = Model::open(m.path, {}, gguf::DataMode::kMmap);
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  EXPECT_EQ((*model)->weights().layers[0].wq.layout, kernels::WeightLayout::kRows);
}

// Rewrites the GGUF at `path` so that tensor `alias` points at the bytes of tensor `target`
// (same shape and type): the tensor-info record's offset field is patched in place.
void alias_tensor(const std::string& path, const std::string& alias, const std::string& target) {
  auto file = gguf::GgufFile::open(path, {.mode = gguf::DataMode::kNone});
  ASSERT_TRUE(file.ok());
  const uint64_t offset = file->find_tensor(target)->offset;
  const gguf::TensorInfo* info = file->find_tensor(alias);
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::vector<char> bytes(static_cast<size_t>(file->data_offset()));
  ASSERT_EQ(std::fread(bytes.data(), 1, bytes.size(), f), bytes.size());
  // The record: u64 name length, name, u32 n_dims, u64 dims[n_dims], u32 type, u64 offset.
  std::string key(8, '\0');
  const uint64_t len = alias.size();
  std::memcpy(key.data(), &len, 8);
  key += alias;
  const auto it = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  ASSERT_NE(it, bytes.end());
  const size_t at =
      static_cast<size_t>(it - bytes.begin()) + key.size() + 4 + 8 * info->shape.size() + 4;
  std::fseek(f, static_cast<long>(at), SEEK_SET);
  ASSERT_EQ(std::fwrite(&offset, 8, 1, f), 1u);
  std::fclose(f);
}

// GGUF lets tensors share bytes; rewriting one in place would corrupt the other, so both stay
// row-major, and the forward pass still matches the ungrouped load.
TEST(GroupWeightsTest, AliasedTensorsAreLeftAlone) {
  const TinyModel m = write_tiny_model(quantized_spec(DType::kQ8_0, false));
  alias_tensor(m.path, "blk.0.attn_v.weight", "blk.0.attn_k.weight");
  ModelOptions plain;
  plain.group_weights = false;
  Runner grouped(m.path), rows(m.path, plain);
  ASSERT_TRUE(grouped.ok()) << grouped.status().to_string();
  const LayerWeights& l = grouped.model().weights().layers[0];
  EXPECT_EQ(l.wk.data, l.wv.data);
  EXPECT_EQ(l.wk.layout, kernels::WeightLayout::kRows);
  EXPECT_EQ(l.wv.layout, kernels::WeightLayout::kRows);
  EXPECT_EQ(l.wq.layout, kernels::WeightLayout::kGrouped16);
  const auto want = rows.feed(kPrompt, 0);
  const auto got = grouped.feed(kPrompt, 0);
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
}

// Weights of a random Q8_0 mixtral-tiny file (4 experts of 256 x 256) read into memory, as
// Model::load builds them before grouping.
struct ExpertFile {
  gguf::GgufFile file;
  Weights weights;
};

ExpertFile load_expert_file(ExpertLayout layout) {
  RandomModelSpec spec;
  spec.shape = *find_model_shape("mixtral-tiny");
  spec.weight_type = DType::kQ8_0;
  spec.expert_layout = layout;
  const std::string path = keel::testing::make_temp_dir("group-experts") + "/m.gguf";
  ThreadPool pool(1);
  EXPECT_TRUE(write_random_model(spec, path, pool).ok());
  auto file = gguf::GgufFile::open(path);
  EXPECT_TRUE(file.ok());
  auto hp = parse_hparams(*file);
  EXPECT_TRUE(hp.ok());
  hp->n_vocab = *read_vocab_size(*file, *hp);
  auto w = load_weights(*file, *hp);
  EXPECT_TRUE(w.ok()) << w.error().to_string();
  return {std::move(*file), std::move(*w)};
}

// With the unowned experts' views emptied (expert_shard.h), grouping rewrites each kept
// expert's slice on its own: the bytes a whole-tensor rewrite gives there, the GGUF bytes (here:
// as read; in a sharded load: never read) everywhere else. Without a shard, the whole tensor is
// rewritten as before.
TEST(GroupWeightsTest, ExpertSlicesAreRewrittenOnTheirOwn) {
  for (ExpertLayout layout : {ExpertLayout::kStacked, ExpertLayout::kGateUp}) {
    const std::string name = layout == ExpertLayout::kGateUp ? "blk.1.ffn_gate_up_exps.weight"
                                                             : "blk.1.ffn_up_exps.weight";
    for (bool sharded : {false, true}) {
      SCOPED_TRACE(name + (sharded ? " sharded" : " whole"));
      ExpertFile f = load_expert_file(layout);
      const gguf::TensorInfo& info = *f.file.find_tensor(name);
      const auto bytes = f.file.tensor_data(info);
      const std::vector<std::byte> original(bytes.begin(), bytes.end());
      std::vector<std::byte> whole = original;
      const size_t row_bytes = f.weights.layers[1].moe.up[0].row_bytes;
      kernels::group_rows_in_place(DType::kQ8_0, static_cast<int64_t>(whole.size() / row_bytes),
                                   row_bytes, whole.data());
      const ExpertShard shard{1, 2, false};  // experts 2 and 3
      if (sharded) apply_expert_shard(f.weights, shard);
      EXPECT_GT(group_weights(f.file, f.weights), 0);
      EXPECT_EQ(f.weights.layers[1].moe.up[3].layout, kernels::WeightLayout::kGrouped16);
      const auto got = f.file.tensor_data(info);
      const size_t slice = got.size() / 4;
      for (size_t e = 0; e < 4; ++e) {
        const bool kept = !sharded || shard.owns(static_cast<int64_t>(e), 4);
        const std::byte* want = (kept ? whole : original).data() + e * slice;
        EXPECT_EQ(0, std::memcmp(got.data() + e * slice, want, slice)) << "expert " << e;
      }
      EXPECT_NE(0, std::memcmp(whole.data(), original.data(), slice));  // grouping moved bytes
    }
  }
}

}  // namespace
}  // namespace keel::model::testing
