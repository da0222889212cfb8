// The trainer's pass (model_pass.h): gradients of the LoRA parameters — A and B both random and
// non-zero — against central finite differences in double through every block of stories260K
// and the loss (norm-wise relative error ≤ 1e-3), also on a Q8_0 copy, with activation
// checkpointing, and on tiny qwen2 (biases, NeoX RoPE) and qwen3 (QK norm) models; the forward
// loss against the cross-entropy of keel's inference logits (no adapter, an adapter written by
// write_lora_adapter and served through LoraAdapter, a Q8_0 copy); bit-identical gradients for
// 1 and 3 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "../draft/quantized_copy.h"
#include "model/tiny_model.h"
#include "support/test_support.h"
#include "train/adapter_file.h"
#include "train_test_util.h"

namespace keel::train::testing {
namespace {

constexpr const char* kStory =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park with her red ball.";

struct GradError {
  double coordinates = 0.0;  // ‖fd − g‖ / ‖g‖ over sampled coordinates of every slot
  double direction = 0.0;    // |fd_v − g·v| / |g·v| along one random direction of all params
  size_t checked = 0;
};

double loss_at(ModelPass<double>& pass, const TrainSequence& s, const std::vector<double>& p) {
  auto r = pass.run(s, p.data(), nullptr);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r->loss_sum : 0.0;
}

GradError check_gradients(const model::Model& m, const LoraLayout& layout, const TrainSequence& s,
                          bool checkpoint, int coords_per_tensor = 3) {
  ThreadPool pool(1);
  ModelPass<double> pass(m, layout, pool, checkpoint);
  std::vector<double> p = random_lora_params<double>(layout, 11, 0.2, 0.2);
  std::vector<double> g(layout.num_params, 0.0);
  auto r = pass.run(s, p.data(), g.data());
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  constexpr double kEps = 1e-5;
  GradError e;
  double num = 0.0, den = 0.0;
  uint64_t draw = 0;
  for (const LoraSlot& slot : layout.slots) {
    const size_t a_n = static_cast<size_t>(layout.rank * slot.in);
    const size_t b_n = static_cast<size_t>(slot.out * layout.rank);
    for (int j = 0; j < 2 * coords_per_tensor; ++j) {
      const bool in_a = j < coords_per_tensor;
      const size_t i = (in_a ? slot.a_offset : slot.b_offset) +
                       static_cast<size_t>(uniform01(99, draw++) * double(in_a ? a_n : b_n));
      const double saved = p[i];
      p[i] = saved + kEps;
      const double lp = loss_at(pass, s, p);
      p[i] = saved - kEps;
      const double lm = loss_at(pass, s, p);
      p[i] = saved;
      const double fd = (lp - lm) / (2 * kEps);
      num += (fd - g[i]) * (fd - g[i]);
      den += g[i] * g[i];
      ++e.checked;
    }
  }
  e.coordinates = std::sqrt(num / den);
  std::vector<double> v(p.size()), pp(p), pm(p);
  double gv = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    v[i] = 2.0 * uniform01(5, i) - 1.0;
    gv += g[i] * v[i];
    pp[i] += kEps * v[i];
    pm[i] -= kEps * v[i];
  }
  const double fd_v = (loss_at(pass, s, pp) - loss_at(pass, s, pm)) / (2 * kEps);
  e.direction = std::fabs(fd_v - gv) / std::fabs(gv);
  return e;
}

LoraLayout layout_for(const model::Model& m, int64_t rank) {
  LoraConfig c;
  c.rank = rank;
  c.alpha = 2.0f * static_cast<float>(rank);
  auto l = make_lora_layout(m, c);
  EXPECT_TRUE(l.ok()) << l.status().to_string();
  return *l;
}

TEST(TrainGradient, MatchesFiniteDifferencesOnStories260K) {
  auto m = model::Model::open(stories_path());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const LoraLayout layout = layout_for(**m, 4);
  EXPECT_EQ(layout.slots.size(), 5u * 7u);
  const TrainSequence s = story_sequence(**m, kStory, 14);
  const GradError e = check_gradients(**m, layout, s, false);
  EXPECT_LE(e.coordinates, 1e-3) << e.checked << " coordinates";
  EXPECT_LE(e.direction, 1e-3);
  std::printf(
      "stories260K: norm-wise relative error %.3g over %zu coordinates, %.3g along a "
      "direction of all %zu parameters\n",
      e.coordinates, e.checked, e.direction, layout.num_params);
}

TEST(TrainGradient, MatchesFiniteDifferencesOnAQ8Copy) {
  const std::string path = keel::testing::make_temp_dir("train-q8") + "/q8.gguf";
  ASSERT_TRUE(keel::testing::write_q8_0_copy(stories_path(), path).ok());
  auto m = model::Model::open(path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_EQ((*m)->weights().layers[0].wq.dtype, DType::kQ8_0);
  const LoraLayout layout = layout_for(**m, 2);
  const GradError e = check_gradients(**m, layout, story_sequence(**m, kStory, 10), true, 1);
  EXPECT_LE(e.coordinates, 1e-3);
  EXPECT_LE(e.direction, 1e-3);
}

TEST(TrainGradient, CheckpointingGivesTheSameGradients) {
  auto m = model::Model::open(stories_path());
  ASSERT_TRUE(m.ok());
  const LoraLayout layout = layout_for(**m, 4);
  const TrainSequence s = story_sequence(**m, kStory, 20);
  const std::vector<float> p = random_lora_params<float>(layout, 3, 0.2, 0.2);
  std::vector<std::vector<float>> grads;
  std::vector<double> losses;
  for (int variant = 0; variant < 3; ++variant) {  // plain, checkpointed, 3 threads
    ThreadPool pool(variant == 2 ? 3 : 1);
    ModelPass<float> pass(**m, layout, pool, variant == 1);
    std::vector<float> g(layout.num_params, 0.0f);
    auto r = pass.run(s, p.data(), g.data(), 0.5);
    ASSERT_TRUE(r.ok());
    grads.push_back(g);
    losses.push_back(r->loss_sum);
  }
  EXPECT_EQ(grads[0], grads[1]);
  EXPECT_EQ(grads[0], grads[2]) << "the thread count changed the gradients";
  EXPECT_EQ(losses[0], losses[2]);
}

TEST(TrainGradient, MatchesFiniteDifferencesOnTinyQwen) {
  for (const char* arch : {"qwen2", "qwen3"}) {
    model::testing::TinySpec spec;
    spec.arch = arch;
    const model::testing::TinyModel tiny = model::testing::write_tiny_model(spec);
    auto m = model::Model::open(tiny.path);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const LoraLayout layout = layout_for(**m, 3);
    TrainSequence s;
    s.tokens = {1, 7, 3, 22, 5, 9, 14, 30, 2, 11};
    s.target = {0, 1, 1, 0, 1, 1, 1, 0, 1, 1};
    const GradError e = check_gradients(**m, layout, s, false);
    EXPECT_LE(e.coordinates, 1e-3) << arch;
    EXPECT_LE(e.direction, 1e-3) << arch;
  }
}

TEST(TrainGradient, FollowsYarnScaledRope) {
  model::testing::TinySpec spec;
  spec.rope_scaling_type = "yarn";
  spec.rope_scaling_factor = 4.0f;
  spec.n_ctx = 256;
  const model::testing::TinyModel tiny = model::testing::write_tiny_model(spec);
  model::testing::Runner runner(tiny.path);
  ASSERT_TRUE(runner.ok()) << runner.status().to_string();
  ASSERT_NE(runner.model().hparams().rope.mscale, 1.0f);
  const LoraLayout layout = layout_for(runner.model(), 2);
  TrainSequence s;
  for (int32_t t = 0; t < 40; ++t) s.tokens.push_back((t * 7 + 3) % 40);
  s.target.assign(s.tokens.size(), 1);
  s.target[0] = 0;
  const GradError e = check_gradients(runner.model(), layout, s, false, 2);
  EXPECT_LE(e.coordinates, 1e-3);
  EXPECT_LE(e.direction, 1e-3);
  // And the forward rotates as keel's inference pass does.
  const std::vector<float> logits = runner.feed(s.tokens, 0);
  const double want = loss_from_logits(logits, runner.n_vocab(), s);
  ThreadPool pool(1);
  ModelPass<float> pass(runner.model(), layout, pool);
  const std::vector<float> p = init_lora_params<float>(layout, 1);
  auto got = pass.run(s, p.data(), nullptr);
  ASSERT_TRUE(got.ok());
  EXPECT_NEAR(got->loss_sum, want, 1e-5 * want);
}

// The trainer's loss of a sequence against the cross-entropy of keel's inference logits for it:
// `runner` sequence `seq` (with whatever adapter it was given).
void expect_loss_matches(model::testing::Runner& runner, int32_t seq, const LoraLayout& layout,
                         const std::vector<float>& params, const TrainSequence& s, double tol) {
  const std::vector<float> logits = runner.feed(s.tokens, seq);
  const double want = loss_from_logits(logits, runner.n_vocab(), s);
  ThreadPool pool(1);
  ModelPass<float> pass(runner.model(), layout, pool);
  auto got = pass.run(s, params.data(), nullptr);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->num_targets, s.num_targets());
  EXPECT_NEAR(got->loss_sum, want, tol * want);
  std::vector<double> pd(params.begin(), params.end());
  ModelPass<double> pass_d(runner.model(), layout, pool);
  auto got_d = pass_d.run(s, pd.data(), nullptr);
  ASSERT_TRUE(got_d.ok());
  EXPECT_NEAR(got_d->loss_sum, want, tol * want);
}

TEST(TrainForward, LossMatchesInferenceLogits) {
  model::testing::Runner runner(stories_path());
  ASSERT_TRUE(runner.ok()) << runner.status().to_string();
  const LoraLayout layout = layout_for(runner.model(), 8);
  const TrainSequence s = story_sequence(runner.model(), kStory, 28);
  // The usual start (B = 0): the base model's loss.
  expect_loss_matches(runner, 0, layout, init_lora_params<float>(layout, 1), s, 1e-5);
  // Random A and B, written as an adapter file and served by keel's forward pass.
  const std::vector<float> p = random_lora_params<float>(layout, 4, 0.2, 0.2);
  const std::string path = keel::testing::make_temp_dir("train-adapter") + "/a.gguf";
  ASSERT_TRUE(write_lora_adapter(layout, p, runner.model(), {}, path).ok());
  auto adapter = model::LoraAdapter::open(path, runner.model());
  ASSERT_TRUE(adapter.ok()) << adapter.status().to_string();
  EXPECT_EQ((*adapter)->rank(), 8);
  EXPECT_FLOAT_EQ((*adapter)->effective_scale(), 2.0f);
  EXPECT_EQ((*adapter)->targets_string(), "q,k,v,o,gate,up,down");
  runner.set_lora(1, adapter->get());
  expect_loss_matches(runner, 1, layout, p, s, 1e-5);
  // And the base loss differs from the adapted one (the adapter is not a no-op).
  const double base = loss_from_logits(runner.feed(s.tokens, 2), runner.n_vocab(), s);
  const double adapted = loss_from_logits(runner.feed(s.tokens, 1), runner.n_vocab(), s);
  EXPECT_GT(std::fabs(base - adapted), 1e-2 * base);
}

TEST(TrainForward, LossMatchesInferenceOnAQ8Copy) {
  const std::string path = keel::testing::make_temp_dir("train-q8") + "/q8.gguf";
  ASSERT_TRUE(keel::testing::write_q8_0_copy(stories_path(), path).ok());
  model::ModelOptions o;
  model::testing::Runner runner(path, o);
  ASSERT_TRUE(runner.ok());
  const LoraLayout layout = layout_for(runner.model(), 4);
  // keel's Q8_0 matmuls also quantize the activations to 8 bits: close, not equal.
  expect_loss_matches(runner, 0, layout, init_lora_params<float>(layout, 1),
                      story_sequence(runner.model(), kStory, 28), 1e-2);
}

TEST(TrainForward, RefusesBadSequences) {
  auto m = model::Model::open(stories_path());
  ASSERT_TRUE(m.ok());
  const LoraLayout layout = layout_for(**m, 2);
  ThreadPool pool(1);
  ModelPass<float> pass(**m, layout, pool);
  const std::vector<float> p = init_lora_params<float>(layout, 1);
  TrainSequence s;
  s.tokens = {1};
  s.target = {0};
  EXPECT_FALSE(pass.run(s, p.data(), nullptr).ok());
  s.tokens = {1, 600};
  s.target = {0, 1};
  EXPECT_FALSE(pass.run(s, p.data(), nullptr).ok());
  s.tokens.assign(513, 1);
  s.target.assign(513, 1);
  EXPECT_FALSE(pass.run(s, p.data(), nullptr).ok());
}

// A set stop flag: a pass returns Cancelled (with or without gradients), and a product over
// frozen weights gives up before writing a row.
TEST(TrainForward, StopsWhenAsked) {
  auto m = model::Model::open(stories_path());
  ASSERT_TRUE(m.ok());
  const LoraLayout layout = layout_for(**m, 2);
  ThreadPool pool(2);
  ModelPass<float> pass(**m, layout, pool);
  const std::vector<float> p = init_lora_params<float>(layout, 1);
  std::vector<float> g(layout.num_params, 0.0f);
  const TrainSequence s = story_sequence(**m, kStory, 16);
  ASSERT_TRUE(pass.run(s, p.data(), g.data()).ok());
  std::atomic<bool> stop{true};
  const TrainGate gate{&stop, nullptr};
  pass.set_gate(&gate);
  EXPECT_EQ(pass.run(s, p.data(), g.data()).status().code(), StatusCode::kCancelled);
  EXPECT_EQ(pass.run(s, p.data(), nullptr).status().code(), StatusCode::kCancelled);
  stop = false;
  EXPECT_TRUE(pass.run(s, p.data(), nullptr).ok());

  DenseMatrix<float> w{64, 8, std::vector<float>(64 * 8, 1.0f)};
  const std::vector<float> x(4 * 8, 1.0f);
  std::vector<float> y(4 * 64, -1.0f);
  stop = true;
  matmul(pool, x.data(), 4, w, y.data(), false, &gate);
  EXPECT_EQ(y, std::vector<float>(4 * 64, -1.0f));
  stop = false;
  matmul(pool, x.data(), 4, w, y.data(), false, &gate);
  EXPECT_EQ(y, std::vector<float>(4 * 64, 8.0f));
}

// A paused gate holds a product before its first row until the pause clears (then it completes),
// and a stop while paused ends the wait without a row written.
TEST(TrainForward, WaitsWhilePausedAndStopsFromAPause) {
  ThreadPool pool(2);
  DenseMatrix<float> w{64, 8, std::vector<float>(64 * 8, 1.0f)};
  const std::vector<float> x(4 * 8, 1.0f);
  std::atomic<bool> stop{false}, pause{true};
  const TrainGate gate{&stop, &pause};
  for (bool end_by_stop : {false, true}) {
    std::vector<float> y(4 * 64, -1.0f);
    std::thread t([&] { matmul(pool, x.data(), 4, w, y.data(), false, &gate); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(y, std::vector<float>(4 * 64, -1.0f));  // nothing written while paused
    (end_by_stop ? stop : pause) = end_by_stop ? true : false;
    t.join();
    EXPECT_EQ(y, std::vector<float>(4 * 64, end_by_stop ? -1.0f : 8.0f));
    pause = true;
  }
}

}  // namespace
}  // namespace keel::train::testing
