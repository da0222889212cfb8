// A context-parallel group of member threads against one process (issue 36's exactness check):
// on a 512-token prompt and 128 greedy decode steps, CP = 2 and 4 give logits within 1e-4 of the
// largest |logit| and the same greedy tokens; each member holds 1/N of the KV bytes (± 2 %) and
// computes 1/N of the prefill's attention (± 10 %). Overlap changes no bit. A member that fails
// ends the step for every member with its error, and the group refuses further steps.
#include "cp/local_group.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "core/thread_pool.h"
#include "model/batch.h"
#include "model/context.h"
#include "model/random_model.h"
#include "support/test_support.h"

namespace keel::cp {
namespace {

kernels::Isa isa() { return kernels::best_isa(detect_cpu_features()); }

const model::Model& tiny_model() {
  static const auto* model = [] {
    model::RandomModelSpec spec;
    spec.shape = *model::find_model_shape("tiny");
    const std::string path = keel::testing::make_temp_dir("cp-group") + "/tiny.gguf";
    ThreadPool pool(1);
    KEEL_CHECK(model::write_random_model(spec, path, pool).ok());
    auto m = model::Model::open(path);
    KEEL_CHECK(m.ok());
    return m->release();
  }();
  return *model;
}

std::vector<int32_t> random_tokens(int n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab) - 1);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int32_t& t : out) t = dist(rng);
  return out;
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// The largest |a - b| over the largest |b|.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, top = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    top = std::max(top, std::abs(static_cast<double>(b[i])));
  }
  return diff / top;
}

// One process: the reference the group is measured against.
class Reference {
 public:
  Reference(const model::Model& m, DType kv_type, int32_t max_positions)
      : pool_(2), ops_(isa(), &pool_), ctx_(m, max_positions) {
    const auto layout = model::KvLayout::for_model(m.hparams(), 16, kv_type);
    kv_.emplace(std::move(*model::KvStorage::create(layout, max_positions / 16 + 1)));
    for (int32_t b = 0; b * 16 < max_positions; ++b) table_.push_back(b);
  }
  std::vector<float> run(std::span<const int32_t> tokens) {
    model::Batch batch;
    const int32_t seq = batch.add_seq(table_);
    for (size_t i = 0; i < tokens.size(); ++i) {
      batch.add(tokens[i], length_++, seq, i + 1 == tokens.size());
    }
    std::vector<float> logits;
    const Status st = ctx_.forward(batch, *kv_, ops_, &logits);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return logits;
  }
  [[nodiscard]] int64_t kv_bytes() const {
    return (length_ + 15) / 16 * static_cast<int64_t>(kv_->layout().block_bytes());
  }

 private:
  ThreadPool pool_;
  kernels::Ops ops_;
  model::Context ctx_;
  std::optional<model::KvStorage> kv_;
  std::vector<int32_t> table_;
  int32_t length_ = 0;
};

std::unique_ptr<LocalGroup> make_group(int n, DType kv_type, bool overlap = true) {
  GroupOptions o;
  o.n_members = n;
  o.isa = isa();
  o.max_positions = 1024;
  o.kv_type = kv_type;
  o.overlap = overlap;
  auto g = LocalGroup::create(tiny_model(), o);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? std::move(*g) : nullptr;
}

struct Shape {
  int n_members;
  DType kv_type;
};

class LocalGroupTest : public ::testing::TestWithParam<Shape> {};

TEST_P(LocalGroupTest, MatchesOneProcessOverPrefillAnd128GreedySteps) {
  const auto [n, kv_type] = GetParam();
  const model::Model& m = tiny_model();
  const auto prompt = random_tokens(512, m.hparams().n_vocab, 7);
  Reference ref(m, kv_type, 1024);
  auto group = make_group(n, kv_type);
  ASSERT_NE(group, nullptr);

  std::vector<float> want = ref.run(prompt), got;
  ASSERT_TRUE(group->prefill(prompt, &got).ok());
  EXPECT_LT(relative_error(got, want), 1e-4);
  // Balance: KV bytes and the prefill's attention pairs, each member against 1/N.
  const auto after_prefill = group->report();
  const double pairs = 512.0 * 513.0 / 2 * static_cast<double>(m.hparams().n_head) *
                       static_cast<double>(m.hparams().n_layer);
  for (const MemberReport& r : after_prefill) {
    EXPECT_NEAR(static_cast<double>(r.kv_bytes), ref.kv_bytes() / double(n),
                0.02 * ref.kv_bytes() / n);
    EXPECT_NEAR(static_cast<double>(r.stats.attention_pairs), pairs / n, 0.1 * pairs / n);
    if (n > 1) {
      EXPECT_GT(r.stats.bytes_sent, 0);
    }
  }

  double worst = 0;
  for (int step = 0; step < 128; ++step) {
    const int32_t next = argmax(want);
    ASSERT_EQ(argmax(got), next) << "greedy token differs at step " << step;
    want = ref.run(std::span<const int32_t>(&next, 1));
    ASSERT_TRUE(group->decode(next, &got).ok());
    worst = std::max(worst, relative_error(got, want));
  }
  EXPECT_LT(worst, 1e-4);
  EXPECT_EQ(group->length(), 640);
  for (const MemberReport& r : group->report()) {
    EXPECT_NEAR(static_cast<double>(r.kv_bytes), ref.kv_bytes() / double(n),
                0.02 * ref.kv_bytes() / n);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LocalGroupTest,
                         ::testing::Values(Shape{2, DType::kF16}, Shape{4, DType::kF16},
                                           Shape{2, DType::kQ8_0}),
                         [](const auto& info) {
                           return "cp" + std::to_string(info.param.n_members) +
                                  (info.param.kv_type == DType::kF16 ? "_f16" : "_q8_0");
                         });

TEST(LocalGroupOverlapTest, OverlapOnAndOffGiveTheSameBits) {
  const auto prompt = random_tokens(300, tiny_model().hparams().n_vocab, 11);
  auto on = make_group(2, DType::kF16, true), off = make_group(2, DType::kF16, false);
  std::vector<float> a, b;
  ASSERT_TRUE(on->prefill(prompt, &a).ok());
  ASSERT_TRUE(off->prefill(prompt, &b).ok());
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  // A follow-up turn passes the whole shards around again; a short one runs replicated.
  const auto more = random_tokens(40, tiny_model().hparams().n_vocab, 12);
  ASSERT_TRUE(on->prefill(more, &a).ok());
  ASSERT_TRUE(off->prefill(more, &b).ok());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  ASSERT_TRUE(on->prefill(std::span(more).first(3), &a).ok());
  Reference ref(tiny_model(), DType::kF16, 1024);
  ref.run(prompt);
  ref.run(more);
  EXPECT_LT(relative_error(a, ref.run(std::span(more).first(3))), 1e-4);
}

TEST(LocalGroupFailureTest, AMemberThatFailsEndsTheStepForAllAndTheGroupStopsThere) {
  auto group = make_group(2, DType::kF16);
  auto prompt = random_tokens(64, tiny_model().hparams().n_vocab, 3);
  prompt[20] = static_cast<int32_t>(tiny_model().hparams().n_vocab);  // member 1's chunk
  std::vector<float> logits;
  const Status st = group->prefill(prompt, &logits);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("token id"), std::string::npos) << st.to_string();
  EXPECT_EQ(group->prefill(random_tokens(8, 10, 1), &logits).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(make_group(2, DType::kF16)->prefill({}, &logits).code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace keel::cp
