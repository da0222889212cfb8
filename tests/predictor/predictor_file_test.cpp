// The predictor file: a round trip keeps every field and weight; missing, mistyped, misshapen or
// non-finite entries, other architectures and garbage bytes are InvalidArgument (never a crash);
// a missing path is NotFound.
#include "predictor/predictor_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <span>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "predictor/features.h"
#include "support/test_support.h"

namespace keel::predictor {
namespace {

const int64_t kD = FeatureExtractor::dim_for(2);

PredictorFile small_file(int64_t hidden) {
  PredictorFile f;
  f.feature_n_embd = 2;
  f.feature_n_vocab = 512;
  f.dataset.max_new_tokens = 64;
  f.dataset.num_prompts = 50;
  f.head = LengthHead::zeros(LengthBuckets{16, 64}, kD, hidden);
  float v = 0.25f;
  for (auto* w : {&f.head.feature_mean, &f.head.w1, &f.head.b1, &f.head.w2, &f.head.b2}) {
    for (float& x : *w) x = (v += 0.5f);
  }
  f.head.feature_scale.assign(static_cast<size_t>(kD), 2.0f);
  f.majority_bucket = 3;
  f.feature_model = "side.gguf";
  f.served_model = "served.gguf";
  f.command = "keel train-predictor -m served.gguf";
  return f;
}

class PredictorFileTest : public ::testing::Test {
 protected:
  std::string dir_ = keel::testing::make_temp_dir("predictor-file");
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // A GGUF with `file`'s metadata and tensors, then `edit` applied to the writer.
  std::string write_edited(const std::string& name,
                           const std::function<void(gguf::GgufWriter&)>& edit,
                           const PredictorFile& file = small_file(3),
                           const std::vector<std::string>& skip_tensors = {}) {
    const std::string good = path(name + ".good");
    EXPECT_TRUE(save_predictor(file, good).ok());
    auto g = gguf::GgufFile::open(good);
    EXPECT_TRUE(g.ok());
    gguf::GgufWriter w;
    for (const auto& kv : g->metadata()) w.set(kv.key, kv.value);
    for (const auto& t : g->tensors()) {
      if (std::find(skip_tensors.begin(), skip_tensors.end(), t.name) != skip_tensors.end()) {
        continue;
      }
      EXPECT_TRUE(w.add_tensor(t.name, t.dtype, t.shape, g->tensor_data(t)).ok());
    }
    edit(w);
    EXPECT_TRUE(w.write(path(name)).ok());
    return path(name);
  }
  void expect_invalid(const std::string& p, const std::string& what) {
    const auto r = load_predictor(p);
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument)
        << what << ": " << r.error().message();
  }
};

TEST_F(PredictorFileTest, RoundTripKeepsEverything) {
  for (int64_t hidden : {0, 3}) {
    const PredictorFile f = small_file(hidden);
    ASSERT_TRUE(save_predictor(f, path("p.gguf")).ok());
    const auto r = load_predictor(path("p.gguf"));
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(r->head.buckets, f.head.buckets);
    EXPECT_EQ(r->head.input_dim, kD);
    EXPECT_EQ(r->head.hidden, hidden);
    EXPECT_EQ(r->head.feature_mean, f.head.feature_mean);
    EXPECT_EQ(r->head.feature_scale, f.head.feature_scale);
    EXPECT_EQ(r->head.w1, f.head.w1);
    EXPECT_EQ(r->head.b1, f.head.b1);
    EXPECT_EQ(r->head.w2, f.head.w2);
    EXPECT_EQ(r->head.b2, f.head.b2);
    EXPECT_EQ(r->majority_bucket, 3);
    EXPECT_EQ(r->feature_model, "side.gguf");
    EXPECT_EQ(r->served_model, "served.gguf");
    EXPECT_EQ(r->command, f.command);
    EXPECT_EQ(r->dataset.num_prompts, 50);
    EXPECT_EQ(r->dataset.seed, f.dataset.seed);
    EXPECT_FLOAT_EQ(r->dataset.temperature, f.dataset.temperature);
    std::vector<float> x(static_cast<size_t>(kD));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
    EXPECT_EQ(r->head.probabilities(x), f.head.probabilities(x));
  }
}

TEST_F(PredictorFileTest, MissingPathIsNotFound) {
  EXPECT_EQ(load_predictor(path("absent.gguf")).error().code(), StatusCode::kNotFound);
}

TEST_F(PredictorFileTest, GarbageAndTruncatedFilesAreInvalidArgument) {
  { std::ofstream(path("garbage")) << "this is not a GGUF file at all, just text"; }
  expect_invalid(path("garbage"), "garbage");
  ASSERT_TRUE(save_predictor(small_file(3), path("full.gguf")).ok());
  const std::string bytes = keel::testing::read_file(path("full.gguf"));
  for (size_t cut : {size_t{3}, size_t{40}, bytes.size() / 2, bytes.size() - 40}) {
    std::ofstream(path("cut"), std::ios::binary | std::ios::trunc) << bytes.substr(0, cut);
    expect_invalid(path("cut"), "truncated at " + std::to_string(cut));
  }
}

TEST_F(PredictorFileTest, BadMetadataIsInvalidArgument) {
  using W = gguf::GgufWriter;
  expect_invalid(write_edited("arch", [](W& w) { w.set("general.architecture", "llama"); }),
                 "another architecture");
  expect_invalid(write_edited("version", [](W& w) { w.set("keel.predictor.version", int64_t{9}); }),
                 "version");
  expect_invalid(
      write_edited("width", [](W& w) { w.set("keel.predictor.bucket_width", int64_t{0}); }),
      "zero bucket width");
  expect_invalid(
      write_edited("wtype", [](W& w) { w.set("keel.predictor.bucket_width", "sixteen"); }),
      "mistyped bucket width");
  expect_invalid(
      write_edited("major", [](W& w) { w.set("keel.predictor.majority_bucket", int64_t{4}); }),
      "majority bucket out of range");
  expect_invalid(
      write_edited("cap",
                   [](W& w) { w.set("keel.predictor.dataset.max_new_tokens", int64_t{60}); }),
      "cap differs from the buckets'");
  expect_invalid(write_edited("hidden", [](W& w) { w.set("keel.predictor.hidden", int64_t{4}); }),
                 "hidden units differ from w1's shape");
  expect_invalid(
      write_edited("embd", [](W& w) { w.set("keel.predictor.feature_model.n_embd", int64_t{3}); }),
      "feature size differs from the tensors'");
}

TEST_F(PredictorFileTest, BadTensorsAreInvalidArgument) {
  expect_invalid(write_edited("nob2", [](gguf::GgufWriter&) {}, small_file(3), {"b2"}),
                 "missing tensor");
  const std::vector<float> wrong(7, 1.0f);
  expect_invalid(
      write_edited(
          "shape",
          [&](gguf::GgufWriter& w) {
            ASSERT_TRUE(w.add_tensor("b2", DType::kF32, {7}, std::as_bytes(std::span(wrong))).ok());
          },
          small_file(3), {"b2"}),
      "misshapen tensor");
  PredictorFile nan = small_file(3);
  const std::vector<float> bad = {1, std::numeric_limits<float>::quiet_NaN(), 1, 1};
  expect_invalid(
      write_edited("nan",
                   [&](gguf::GgufWriter& w) {
                     ASSERT_TRUE(
                         w.add_tensor("b2", DType::kF32, {4}, std::as_bytes(std::span(bad))).ok());
                   },
                   nan, {"b2"}),
      "NaN weight");
  const std::vector<float> zero(static_cast<size_t>(kD), 0.0f);
  expect_invalid(write_edited("scale",
                              [&](gguf::GgufWriter& w) {
                                ASSERT_TRUE(w.add_tensor("feature_scale", DType::kF32, {kD},
                                                         std::as_bytes(std::span(zero)))
                                                .ok());
                              },
                              small_file(3), {"feature_scale"}),
                 "zero feature scale");
}

TEST_F(PredictorFileTest, SaveRejectsAnInvalidHead) {
  PredictorFile f = small_file(3);
  f.head.w2.pop_back();
  EXPECT_EQ(save_predictor(f, path("x.gguf")).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace keel::predictor
