// ExpertShard (model/expert_shard.h): validation; the byte ranges a shard's load skips in each
// expert layout (3-D stacked, merged gate/up, one tensor per expert), with experts_only also the
// non-expert matrices but never a vector; and sharded loads of quantized (so row-grouped) models:
// the kept views hold the whole model's bytes in the same layout, the rest are empty, and the
// skipped bytes of the file were never read (still zero).
#include "model/expert_shard.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "model/random_model.h"
#include "support/test_support.h"

namespace keel::model {
namespace {

std::string write_shape(const std::string& shape, DType type, ExpertLayout layout) {
  RandomModelSpec spec;
  spec.shape = *find_model_shape(shape);
  spec.weight_type = type;
  spec.expert_layout = layout;
  const std::string path = keel::testing::make_temp_dir("expert-shard") + "/m.gguf";
  ThreadPool pool(1);
  const Status st = write_random_model(spec, path, pool);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return path;
}

std::vector<gguf::TensorInfo> tensors_of(const std::string& path) {
  auto f = gguf::GgufFile::open(path, {.mode = gguf::DataMode::kNone});
  EXPECT_TRUE(f.ok()) << f.error().to_string();
  return f.ok() ? f->tensors() : std::vector<gguf::TensorInfo>{};
}

bool is_expert_name(const std::string& name) {
  return name.find("_exps.") != std::string::npos ||
         (name.find(".ffn_") != std::string::npos && name.find("_inp") == std::string::npos &&
          name.find("_shexp") == std::string::npos &&
          std::count(name.begin(), name.end(), '.') == 4);
}

// The skips written out from the layout's definition: expert e of a 3-D tensor is the e-th of
// shape[2] equal slices, a per-expert tensor is blk.N.ffn_*.E.weight.
std::vector<gguf::ByteRange> expected_skips(const std::vector<gguf::TensorInfo>& tensors,
                                            const ExpertShard& shard, int64_t n_expert) {
  std::vector<gguf::ByteRange> out;
  for (const gguf::TensorInfo& t : tensors) {
    const int64_t layer = t.name.starts_with("blk.") ? std::stoll(t.name.substr(4)) : -1;
    if (t.name.find("_exps.") != std::string::npos) {
      const auto n = static_cast<uint64_t>(t.shape[2]);
      for (uint64_t e = 0; e < n; ++e) {
        if (!shard.holds(layer, int64_t(e), n_expert))
          out.push_back({t.offset + e * t.num_bytes / n, t.num_bytes / n});
      }
    } else if (is_expert_name(t.name)) {
      const size_t dot = t.name.rfind(".weight");
      const size_t start = t.name.rfind('.', dot - 1) + 1;
      if (!shard.holds(layer, std::stoll(t.name.substr(start, dot - start)), n_expert)) {
        out.push_back({t.offset, t.num_bytes});
      }
    } else if (shard.experts_only && t.shape.size() >= 2) {
      out.push_back({t.offset, t.num_bytes});
    }
  }
  return gguf::normalize_ranges(out);
}

bool intersects(const std::vector<gguf::ByteRange>& ranges, const gguf::TensorInfo& t) {
  return gguf::subtract_ranges({{t.offset, t.num_bytes}}, ranges) !=
         std::vector<gguf::ByteRange>{{t.offset, t.num_bytes}};
}

TEST(ExpertShardTest, ValidateChecksCountIndexAndTheLeader) {
  EXPECT_TRUE(ExpertShard{}.validate().ok());
  EXPECT_TRUE((ExpertShard{3, 4, true}.validate().ok()));
  EXPECT_TRUE((ExpertShard{0, 64, false}.validate().ok()));
  for (const ExpertShard& bad :
       {ExpertShard{0, 0, false}, ExpertShard{0, 65, false}, ExpertShard{-1, 2, false},
        ExpertShard{2, 2, false}, ExpertShard{0, 2, true}, ExpertShard{0, 1, true}}) {
    const Status s = bad.validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad.index << "/" << bad.count;
  }
  EXPECT_TRUE((ExpertShard{0, 1, false}.whole()));
  EXPECT_FALSE((ExpertShard{0, 2, false}.whole()));
  // Contiguous ranges: of 8 experts over 3 shards, shard 1 holds experts 3, 4 and 5.
  for (int64_t e = 0; e < 8; ++e) {
    EXPECT_EQ((ExpertShard{1, 3, false}.owns(e, 8)), e >= 3 && e <= 5) << e;
  }
  EXPECT_EQ(ExpertShard::owner(7, 8, 3), 2);
  EXPECT_EQ(ExpertShard::owner(7, 8, 1), 0);
  ModelOptions o;
  o.expert_shard = {0, 2, true};
  EXPECT_NE(o.validate().message().find("expert_shard"), std::string::npos);
}

TEST(ExpertShardTest, SkipsTheUnownedExpertsOfEachLayout) {
  struct Case {
    const char* shape;
    ExpertLayout layout;
  };
  for (const Case c :
       {Case{"qwen3moe-tiny", ExpertLayout::kStacked},
        Case{"qwen2moe-tiny", ExpertLayout::kStacked}, Case{"mixtral-tiny", ExpertLayout::kGateUp},
        Case{"mixtral-tiny", ExpertLayout::kPerExpert}}) {
    SCOPED_TRACE(std::string(c.shape) + " layout " + std::to_string(int(c.layout)));
    const std::vector<gguf::TensorInfo> tensors =
        tensors_of(write_shape(c.shape, DType::kQ8_0, c.layout));
    EXPECT_TRUE(expert_shard_skips(tensors, {}).empty());
    uint64_t expert_bytes = 0;
    for (const gguf::TensorInfo& t : tensors)
      expert_bytes += is_expert_name(t.name) ? t.num_bytes : 0;
    ASSERT_GT(expert_bytes, 0u);
    // The last two hold replicas too: copies of shard 0's experts, a different one per layer.
    for (const ExpertShard& shard :
         {ExpertShard{0, 2, false}, ExpertShard{1, 2, false}, ExpertShard{1, 2, true},
          ExpertShard{2, 3, true}, ExpertShard{1, 2, true, {{0, 1}, {1, 0}}},
          ExpertShard{2, 3, true, {{0, 0}, {1, 1}}}}) {
      const std::vector<gguf::ByteRange> skips = expert_shard_skips(tensors, shard);
      EXPECT_EQ(skips, expected_skips(tensors, shard, find_model_shape(c.shape)->n_expert))
          << shard.index << "/" << shard.count;
      EXPECT_EQ(skips, gguf::normalize_ranges(skips));  // sorted, disjoint
      uint64_t skipped_expert_bytes = 0;
      for (const gguf::TensorInfo& t : tensors) {
        const bool vector = t.shape.size() == 1;
        if (!is_expert_name(t.name) && (vector || !shard.experts_only)) {
          EXPECT_FALSE(intersects(skips, t)) << t.name;  // read whole
        } else if (!is_expert_name(t.name)) {
          EXPECT_TRUE(gguf::subtract_ranges({{t.offset, t.num_bytes}}, skips).empty()) << t.name;
        }
        if (is_expert_name(t.name)) {
          const uint64_t kept =
              gguf::total_bytes(gguf::subtract_ranges({{t.offset, t.num_bytes}}, skips));
          skipped_expert_bytes += t.num_bytes - kept;
        }
      }
      // Every expert of every layer is as large: the share of (layer, expert) pairs not held.
      const int64_t n_expert = find_model_shape(c.shape)->n_expert;
      const int64_t n_layer = find_model_shape(c.shape)->n_layer;
      int64_t unheld = 0;
      for (int64_t l = 0; l < n_layer; ++l) {
        for (int64_t e = 0; e < n_expert; ++e) unheld += shard.holds(l, e, n_expert) ? 0 : 1;
      }
      EXPECT_EQ(skipped_expert_bytes * uint64_t(n_expert * n_layer),
                expert_bytes * uint64_t(unheld));
    }
  }
}

// A skip never takes bytes a kept tensor views, even when tensors alias (an expert's slice
// sharing a kept tensor's bytes).
TEST(ExpertShardTest, KeptBytesWinOverSkipsWhenTensorsAlias) {
  // Four experts of 512 bytes at 0, 512, 1024, 1536 (shard 0 of 2 holds experts 0 and 1, shard 1
  // experts 2 and 3); attn_q aliases expert 1's bytes.
  const gguf::TensorInfo exps{"blk.0.ffn_up_exps.weight", {32, 4, 4}, DType::kF32, 0, 512, 2048};
  const gguf::TensorInfo attn{"blk.0.attn_q.weight", {32, 4}, DType::kF32, 512, 128, 512};
  using R = std::vector<gguf::ByteRange>;
  EXPECT_EQ(expert_shard_skips({exps, attn}, {0, 2, false}), (R{{1024, 1024}}));
  EXPECT_EQ(expert_shard_skips({exps, attn}, {1, 2, false}), (R{{0, 512}}));  // attn_q kept
  // An expert member keeps no attention: expert 1 and the attn_q aliasing it both go.
  EXPECT_EQ(expert_shard_skips({exps, attn}, {1, 2, true}), (R{{0, 1024}}));
  // Expert 2's bytes are kept by shard 1 even though experts_only skips attn_q over them.
  const gguf::TensorInfo attn2{"blk.0.attn_q.weight", {32, 4}, DType::kF32, 1024, 128, 512};
  EXPECT_EQ(expert_shard_skips({exps, attn2}, {1, 2, true}), (R{{0, 1024}}));
  EXPECT_EQ(expert_shard_skips({exps, attn2}, {0, 2, false}), (R{{1536, 512}}));
  // Without the alias, experts_only skips attn_q (a matrix) but not a vector.
  const gguf::TensorInfo q{"blk.0.attn_q.weight", {32, 4}, DType::kF32, 2048, 128, 512};
  const gguf::TensorInfo norm{"blk.0.attn_norm.weight", {32}, DType::kF32, 2560, 32, 128};
  const gguf::TensorInfo column{
      "blk.0.ffn_gate_inp_shexp.weight", {32, 1}, DType::kF32, 2688, 32, 128};
  EXPECT_EQ(expert_shard_skips({exps, q, norm, column}, {1, 2, true}), (R{{0, 1024}, {2048, 512}}));
}

// The data section's bytes [offset, offset + bytes).
std::span<const std::byte> section_bytes(const gguf::GgufFile& f, const gguf::ByteRange& r) {
  gguf::TensorInfo t;
  t.offset = r.offset;
  t.num_bytes = r.bytes;
  return f.tensor_data(t);
}

void expect_same(const kernels::Matrix& want, const kernels::Matrix& got, const std::string& what) {
  EXPECT_EQ(got.dtype, want.dtype) << what;
  EXPECT_EQ(got.rows, want.rows) << what;
  EXPECT_EQ(got.cols, want.cols) << what;
  EXPECT_EQ(got.row_bytes, want.row_bytes) << what;
  EXPECT_EQ(got.layout, want.layout) << what;
  ASSERT_NE(got.data, nullptr) << what;
  EXPECT_EQ(0, std::memcmp(got.data, want.data, static_cast<size_t>(want.rows) * want.row_bytes))
      << what;
}

void expect_empty(const kernels::Matrix& m, const std::string& what) {
  EXPECT_EQ(m.data, nullptr) << what;
  EXPECT_EQ(m.rows, 0) << what;
}

void check_sharded_load(const std::string& path, const ExpertShard& shard) {
  SCOPED_TRACE("shard " + std::to_string(shard.index) + "/" + std::to_string(shard.count) +
               (shard.experts_only ? " experts_only" : ""));
  auto whole = Model::open(path);
  ASSERT_TRUE(whole.ok()) << whole.error().to_string();
  ModelOptions opts;
  opts.expert_shard = shard;
  auto part = Model::open(path, opts);
  ASSERT_TRUE(part.ok()) << part.error().to_string();
  EXPECT_EQ((*part)->expert_shard().index, shard.index);
  const Weights& ww = (*whole)->weights();
  const Weights& pw = (*part)->weights();
  for (size_t il = 0; il < ww.layers.size(); ++il) {
    const MoeWeights& wm = ww.layers[il].moe;
    const MoeWeights& pm = pw.layers[il].moe;
    ASSERT_EQ(pm.gate.size(), wm.gate.size());
    EXPECT_EQ(wm.up[1].layout, kernels::WeightLayout::kGrouped16);
    for (size_t e = 0; e < wm.gate.size(); ++e) {
      for (int b = 0; b < 3; ++b) {
        const auto& wb = b == 0 ? wm.gate : b == 1 ? wm.up : wm.down;
        const auto& pb = b == 0 ? pm.gate : b == 1 ? pm.up : pm.down;
        const std::string what = "layer " + std::to_string(il) + " bank " + std::to_string(b) +
                                 " expert " + std::to_string(e);
        if (shard.holds(int64_t(il), int64_t(e), int64_t(wm.gate.size()))) {
          expect_same(wb[e], pb[e], what);
        } else {
          expect_empty(pb[e], what);
        }
      }
    }
    const LayerWeights& wl = ww.layers[il];
    const LayerWeights& pl = pw.layers[il];
    EXPECT_EQ(pl.attn_norm, wl.attn_norm);
    EXPECT_EQ(pl.ffn_norm, wl.ffn_norm);
    for (auto [w, p] : {std::pair{&wl.wq, &pl.wq}, {&wl.wo, &pl.wo}, {&wm.router, &pm.router}}) {
      if (shard.experts_only) {
        expect_empty(*p, "non-expert matrix");
      } else {
        expect_same(*w, *p, "non-expert matrix");
      }
    }
  }
  if (shard.experts_only) {
    expect_empty(pw.token_embd, "token_embd");
    expect_empty(pw.output, "output");
  } else {
    expect_same(ww.output, pw.output, "output");
  }
  EXPECT_EQ(pw.output_norm, ww.output_norm);
  // What the shard skipped was never read: still the zeros of the fresh buffer.
  const std::vector<gguf::ByteRange> skips = expert_shard_skips((*part)->file().tensors(), shard);
  ASSERT_FALSE(skips.empty());
  for (const gguf::ByteRange& r : skips) {
    const auto bytes = section_bytes((*part)->file(), r);
    const bool zero =
        std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
    EXPECT_TRUE(zero) << "bytes at " << r.offset;
    const auto full = section_bytes((*whole)->file(), r);
    EXPECT_FALSE(
        std::all_of(full.begin(), full.end(), [](std::byte b) { return b == std::byte{0}; }));
  }
}

TEST(ExpertShardTest, ShardedLoadsKeepTheOwnedViewsByteForByte) {
  struct Case {
    const char* shape;
    DType type;
    ExpertLayout layout;
  };
  for (const Case c : {Case{"qwen3moe-tiny", DType::kQ8_0, ExpertLayout::kStacked},
                       Case{"mixtral-tiny", DType::kQ4_0, ExpertLayout::kGateUp},
                       Case{"mixtral-tiny", DType::kQ4_0, ExpertLayout::kPerExpert}}) {
    SCOPED_TRACE(c.shape);
    const std::string path = write_shape(c.shape, c.type, c.layout);
    for (const ExpertShard& shard :
         {ExpertShard{0, 2, false}, ExpertShard{1, 2, true}, ExpertShard{2, 3, true},
          ExpertShard{1, 2, true, {{0, 1}, {1, 0}}}}) {
      check_sharded_load(path, shard);
    }
  }
}

TEST(ExpertShardTest, LoadedAndMappedFilesEmptyTheViewsOnly) {
  const std::string path = write_shape("qwen3moe-tiny", DType::kQ8_0, ExpertLayout::kStacked);
  ModelOptions opts;
  opts.expert_shard = {1, 2, true};
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  auto loaded = Model::load(std::move(*file), opts);
  ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
  auto mapped = Model::open(path, opts, gguf::DataMode::kMmap);
  ASSERT_TRUE(mapped.ok()) << mapped.error().to_string();
  for (const Model* m : {loaded->get(), mapped->get()}) {
    const MoeWeights& moe = m->weights().layers[0].moe;
    expect_empty(moe.up[0], "unowned expert");
    EXPECT_NE(moe.up[4].data, nullptr);  // shard 1 of 2 holds experts 4..7
    expect_empty(m->weights().layers[0].wq, "attention");
    expect_empty(m->weights().output, "output");
    // The bytes were all read (or mapped): the skipped ones are not zero.
    const gguf::TensorInfo& t = *m->file().find_tensor("blk.0.attn_q.weight");
    const auto bytes = m->file().tensor_data(t);
    EXPECT_FALSE(
        std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; }));
  }
  EXPECT_EQ(mapped->get()->weights().layers[0].moe.up[1].layout, kernels::WeightLayout::kRows);
}

TEST(ExpertShardTest, DenseModelsAndBadShardsAreRefused) {
  const std::string dense = write_shape("tiny", DType::kQ8_0, ExpertLayout::kStacked);
  ModelOptions opts;
  opts.expert_shard = {1, 2, false};
  auto r = Model::open(dense, opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("mixture-of-experts"), std::string::npos);
  opts.expert_shard = {2, 2, false};
  r = Model::open(dense, opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find("expert shard index 2"), std::string::npos);
}

}  // namespace
}  // namespace keel::model
