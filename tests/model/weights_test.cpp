// Weight loading: presence, shape and type validation with precise errors; f16/bf16 vectors
// converted to f32; tied output; the data modes.
#include "model/weights.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/model.h"
#include "tiny_model.h"

namespace keel::model::testing {
namespace {

using ::testing::HasSubstr;

Status weights_load_error(const TinyModel& m) {
  auto r = Model::open(m.path);
  if (r.ok()) return Status::internal("unexpectedly loaded " + m.path);
  return r.error();
}

TEST(WeightsTest, MissingTensorIsNamed) {
  TinySpec s;
  s.skip_tensors = {"blk.1.ffn_up.weight"};
  const TinyModel m = write_tiny_model(s);
  const Status st = weights_load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.message(), m.path + ": tensor 'blk.1.ffn_up.weight' is missing");
}

TEST(WeightsTest, MissingEmbeddingIsNamed) {
  TinySpec s;
  s.skip_tensors = {"token_embd.weight"};
  const TinyModel m = write_tiny_model(s);
  const Status st = weights_load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.message(), m.path + ": tensor 'token_embd.weight' is missing");
}

TEST(WeightsTest, ArchitectureSpecificTensorsAreRequired) {
  TinySpec s;
  s.arch = "qwen2";
  s.skip_tensors = {"blk.0.attn_k.bias"};
  TinyModel m = write_tiny_model(s);
  Status st = weights_load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.message(), m.path + ": tensor 'blk.0.attn_k.bias' is missing");
  s.arch = "qwen3";
  s.skip_tensors = {"blk.1.attn_q_norm.weight"};
  m = write_tiny_model(s);
  st = weights_load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.message(), m.path + ": tensor 'blk.1.attn_q_norm.weight' is missing");
}

TEST(WeightsTest, WrongShapeIsNamed) {
  TinySpec s;
  s.shape_override = {{"blk.0.attn_k.weight", {32, 12}}};
  const TinyModel m = write_tiny_model(s);
  const Status st = weights_load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), m.path +
                              ": tensor 'blk.0.attn_k.weight' has shape [32, 12], expected [32, "
                              "16] from the hyper-parameters");
}

TEST(WeightsTest, WrongNormAndBiasShapesAreNamed) {
  TinySpec s;
  s.shape_override = {{"blk.1.ffn_norm.weight", {31}}};
  TinyModel m = write_tiny_model(s);
  Status st = weights_load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("'blk.1.ffn_norm.weight' has shape [31], expected [32]"));
  s = TinySpec();
  s.arch = "qwen2";
  s.shape_override = {{"blk.0.attn_q.bias", {16}}};
  m = write_tiny_model(s);
  st = weights_load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("'blk.0.attn_q.bias' has shape [16], expected [32]"));
}

TEST(WeightsTest, WrongEmbeddingWidthIsNamed) {
  TinySpec s;
  s.shape_override = {{"token_embd.weight", {16, 40}}};
  const TinyModel m = write_tiny_model(s);
  const Status st = weights_load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), m.path +
                              ": tensor 'token_embd.weight' has shape [16, 40], expected [32, "
                              "n_vocab]");
}

TEST(WeightsTest, DeclaredVocabularySizeMustMatchEmbedding) {
  TinySpec s;
  s.extra_keys = {{"llama.vocab_size", uint32_t{41}}};
  const TinyModel m = write_tiny_model(s);
  const Status st = weights_load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            m.path + ": llama.vocab_size (41) differs from the 40 rows of token_embd.weight");
  s.extra_keys = {{"llama.vocab_size", uint32_t{40}}};
  EXPECT_TRUE(Model::open(write_tiny_model(s).path).ok());
}

TEST(WeightsTest, OutputVocabularyMustMatchEmbedding) {
  TinySpec s;
  s.shape_override = {{"output.weight", {32, 41}}};
  const TinyModel m = write_tiny_model(s);
  const Status st = weights_load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("'output.weight' has shape [32, 41], expected [32, 40]"));
}

TEST(WeightsTest, UnsupportedMatrixTypeIsNamed) {
  TinySpec s;
  s.n_embd = 256;  // IQ2_XS blocks hold 256 values
  s.n_layer = 1;
  s.dtype_override = {{"blk.0.attn_q.weight", DType::kIQ2_XS}};
  const TinyModel m = write_tiny_model(s);
  const Status st = weights_load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_EQ(st.message(),
            m.path + ": blk.0.attn_q.weight has type IQ2_XS, which keel does not support");
}

TEST(WeightsTest, QuantizedNormIsUnsupported) {
  TinySpec s;
  s.dtype_override = {{"blk.0.attn_norm.weight", DType::kQ8_0}};
  const TinyModel m = write_tiny_model(s);
  const Status st = weights_load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_THAT(st.message(), HasSubstr("blk.0.attn_norm.weight has type Q8_0"));
}

TEST(WeightsTest, HalfPrecisionVectorsAreConvertedToF32) {
  for (DType dt : {DType::kF16, DType::kBF16}) {
    TinySpec s;
    s.arch = "qwen2";
    s.norm_dtype = dt;
    const TinyModel m = write_tiny_model(s);
    auto model = Model::open(m.path);
    ASSERT_TRUE(model.ok()) << model.error().to_string();
    const LayerWeights& l = (*model)->weights().layers[1];
    EXPECT_EQ(l.attn_norm, m.tensors.at("blk.1.attn_norm.weight"));
    EXPECT_EQ(l.bk, m.tensors.at("blk.1.attn_k.bias"));
    EXPECT_EQ((*model)->weights().output_norm, m.tensors.at("output_norm.weight"));
    EXPECT_NE(l.attn_norm[0], 0.0f);
  }
}

TEST(WeightsTest, TiedOutputUsesTheEmbedding) {
  TinySpec s;
  s.tied_output = true;
  auto tied = Model::open(write_tiny_model(s).path);
  ASSERT_TRUE(tied.ok()) << tied.error().to_string();
  const Weights& w = (*tied)->weights();
  EXPECT_TRUE(w.tied_output);
  EXPECT_EQ(w.output.data, w.token_embd.data);
  EXPECT_EQ(w.output.rows, 40);
  s.tied_output = false;
  auto separate = Model::open(write_tiny_model(s).path);
  ASSERT_TRUE(separate.ok());
  EXPECT_FALSE((*separate)->weights().tied_output);
  EXPECT_NE((*separate)->weights().output.data, (*separate)->weights().token_embd.data);
}

TEST(WeightsTest, RopeFreqsAreValidated) {
  TinySpec s;
  s.rope_freqs = {1.0f, 2.0f, 4.0f};  // n_rot / 2 = 4 expected
  TinyModel m = write_tiny_model(s);
  Status st = weights_load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("'rope_freqs.weight' has shape [3], expected [4]"));
  s.rope_freqs = {1.0f, 2.0f, 0.0f, 8.0f};
  m = write_tiny_model(s);
  st = weights_load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("rope_freqs.weight[2] = 0.000000 is not a positive"));
  s.rope_freqs = {1.0f, 2.0f, 4.0f, 8.0f};
  auto ok = Model::open(write_tiny_model(s).path);
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  const float* ff = (*ok)->hparams().rope.freq_factors;
  ASSERT_NE(ff, nullptr);
  EXPECT_EQ(ff, (*ok)->weights().rope_freqs.data());
  EXPECT_EQ(ff[3], 8.0f);
}

TEST(WeightsTest, MetadataOnlyFileIsRejected) {
  const TinyModel m = write_tiny_model(TinySpec());
  gguf::ReadOptions opts;
  opts.mode = gguf::DataMode::kNone;
  auto file = gguf::GgufFile::open(m.path, opts);
  ASSERT_TRUE(file.ok());
  auto model = Model::load(std::move(*file));
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(model.error().message(), HasSubstr("opened without tensor data"));
}

TEST(WeightsTest, ModelOptionsAreValidated) {
  const TinyModel m = write_tiny_model(TinySpec());
  ModelOptions o;
  o.n_ctx = -1;
  auto r = Model::open(m.path, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.error().message(), "model option n_ctx = -1 is out of range [0, 16777216]");
  o = ModelOptions();
  o.n_ctx = 16;
  r = Model::open(m.path, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->n_ctx(), 16);
  EXPECT_EQ((*r)->hparams().n_ctx_train, 64);
}

}  // namespace
}  // namespace keel::model::testing
