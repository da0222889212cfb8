// PpStep's codec: a round trip keeps every field; every truncation, a bad magic or version and
// trailing bytes are InvalidArgument (decoding is total: no input crashes it).
#include <gtest/gtest.h>

#include <random>

#include "pipeline/pp_step.h"

namespace keel::pipeline {
namespace {

engine::PipelineStep sample_step(model::Batch* batch, std::vector<float>* residual,
                                 std::vector<engine::BlockCopy>* copies) {
  batch->add_seq({3, 1, 4});
  batch->add_seq({5});
  batch->add(10, 0, 0, false);
  batch->add(11, 1, 0, true);
  batch->add(12, 7, 1, true);
  *residual = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, -7.0f};
  *copies = {{2, 9}, {0, 1}};
  engine::PipelineStep step;
  step.batch = batch;
  step.residual = *residual;
  step.block_copies = *copies;
  return step;
}

TEST(PpStepTest, RoundTripKeepsEveryField) {
  model::Batch batch;
  std::vector<float> residual;
  std::vector<engine::BlockCopy> copies;
  const std::vector<uint8_t> bytes = encode_pp_step(sample_step(&batch, &residual, &copies));
  Result<PpStep> got = decode_pp_step(bytes);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->block_copies, copies);
  EXPECT_EQ(got->batch.tokens, batch.tokens);
  EXPECT_EQ(got->batch.positions, batch.positions);
  EXPECT_EQ(got->batch.seq_index, batch.seq_index);
  EXPECT_EQ(got->batch.logits, batch.logits);
  ASSERT_EQ(got->batch.seqs.size(), 2u);
  EXPECT_EQ(got->batch.seqs[0].block_table, batch.seqs[0].block_table);
  EXPECT_EQ(got->batch.seqs[1].block_table, batch.seqs[1].block_table);
  EXPECT_EQ(got->residual, residual);
}

TEST(PpStepTest, EmptyCopiesOnlyStepRoundTrips) {
  model::Batch empty;
  std::vector<engine::BlockCopy> copies = {{1, 2}};
  engine::PipelineStep step;
  step.batch = &empty;
  step.block_copies = copies;
  Result<PpStep> got = decode_pp_step(encode_pp_step(step));
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->batch.empty());
  EXPECT_EQ(got->block_copies, copies);
}

TEST(PpStepTest, MalformedBytesAreRefused) {
  model::Batch batch;
  std::vector<float> residual;
  std::vector<engine::BlockCopy> copies;
  const std::vector<uint8_t> bytes = encode_pp_step(sample_step(&batch, &residual, &copies));
  for (size_t n = 0; n < bytes.size(); ++n) {  // every truncation
    Result<PpStep> r = decode_pp_step(std::span<const uint8_t>(bytes.data(), n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_FALSE(decode_pp_step(longer).ok());
  std::vector<uint8_t> magic = bytes;
  magic[0] ^= 1;
  EXPECT_FALSE(decode_pp_step(magic).ok());
  std::vector<uint8_t> version = bytes;
  version[4] = 9;
  EXPECT_FALSE(decode_pp_step(version).ok());
  std::mt19937 rng(7);  // random bytes after a valid header never crash the decoder
  for (int i = 0; i < 200; ++i) {
    std::vector<uint8_t> junk(bytes.begin(), bytes.begin() + 8);
    junk.resize(8 + rng() % 64);
    for (size_t j = 8; j < junk.size(); ++j) junk[j] = static_cast<uint8_t>(rng());
    (void)decode_pp_step(junk);
  }
  EXPECT_FALSE(decode_floats(std::vector<uint8_t>(5)).ok());
}

}  // namespace
}  // namespace keel::pipeline
