// The expert-parallel frames: each kind round-trips, and a frame that is truncated, of another
// version, or names a row past the batch does not decode.
#include "ep/expert_frame.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace keel::ep {
namespace {

TEST(ExpertFrameTest, HelloRoundTrips) {
  std::vector<std::byte> buf(256);
  EpHello h{123456789, 48, 2048, 128, 8, 768, 1, 2, 512};
  ASSERT_TRUE(encode_hello(h, 7, buf).ok());
  auto f = decode_frame(buf);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->kind, FrameKind::kHello);
  EXPECT_EQ(f->seq, 7u);
  auto back = decode_hello(*f);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, h);
  EXPECT_FALSE(decode_work(*f).ok());  // a hello is not work
}

TEST(ExpertFrameTest, AHelloCarriesItsReplicasAndAMalformedListIsRefused) {
  std::vector<std::byte> buf(256);
  EpHello h{99, 2, 256, 8, 2, 128, 1, 2, 16, {{0, 1}, {0, 6}, {1, 2}}};
  auto n = encode_hello(h, 3, buf);
  ASSERT_TRUE(n.ok());
  auto f = decode_frame(buf);
  ASSERT_TRUE(f.ok());
  auto back = decode_hello(*f);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, h);
  // A count past n_layer · n_expert, and a body one pair short, do not decode.
  std::vector<std::byte> bad(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(*n));
  const size_t count_at = kFrameHeaderBytes + 8 + 8 * 4;
  int32_t huge = 17;  // 2 layers x 8 experts = 16 at most
  std::memcpy(bad.data() + count_at, &huge, 4);
  EXPECT_EQ(decode_hello(*decode_frame(bad)).status().code(), StatusCode::kCorrupt);
  int32_t four = 4;  // the body holds three pairs
  std::memcpy(bad.data() + count_at, &four, 4);
  EXPECT_EQ(decode_hello(*decode_frame(bad)).status().code(), StatusCode::kCorrupt);
}

TEST(ExpertFrameTest, WorkAndOutputsRoundTrip) {
  const int32_t d = 4;
  std::vector<float> rows = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<int32_t> slot_row = {0, 1, 1}, slot_expert = {5, 3, 9};
  model::ExpertWork w{3, 2, rows.data(), 3, slot_row.data(), slot_expert.data()};
  std::vector<std::byte> buf(work_frame_bytes(2, 3, d));
  ASSERT_TRUE(encode_work(w, d, 1, buf).ok());
  auto f = decode_frame(buf);
  ASSERT_TRUE(f.ok());
  auto v = decode_work(*f);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(v->layer, 3);
  EXPECT_EQ(v->n_rows, 2);
  EXPECT_EQ(v->n_slots, 3);
  EXPECT_EQ(std::vector<float>(v->rows, v->rows + 8), rows);
  EXPECT_EQ(std::vector<int32_t>(v->slot_row, v->slot_row + 3), slot_row);
  EXPECT_EQ(std::vector<int32_t>(v->slot_expert, v->slot_expert + 3), slot_expert);

  std::vector<std::byte> out(outputs_frame_bytes(3, d));
  ASSERT_TRUE(encode_outputs(3, d, 42, 1, out).ok());
  for (int i = 0; i < 12; ++i) outputs_area(out)[i] = static_cast<float>(i);
  auto of = decode_frame(out);
  ASSERT_TRUE(of.ok());
  auto o = decode_outputs(*of);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->compute_ns, 42u);
  EXPECT_EQ(o->ys[11], 11.0f);
}

TEST(ExpertFrameTest, ErrorsCarryTheirStatus) {
  std::vector<std::byte> buf(128);
  ASSERT_TRUE(encode_error(Status::invalid_argument("expert 3 is not held here"), 2, buf).ok());
  auto f = decode_frame(buf);
  ASSERT_TRUE(f.ok());
  const Status s = decode_error(*f);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "expert 3 is not held here");
}

TEST(ExpertFrameTest, MalformedFramesAreRefused) {
  std::vector<float> rows(8, 1.0f);
  std::vector<int32_t> slot_row = {0, 1}, slot_expert = {1, 2};
  model::ExpertWork w{0, 2, rows.data(), 2, slot_row.data(), slot_expert.data()};
  std::vector<std::byte> buf(work_frame_bytes(2, 2, 4));
  EXPECT_FALSE(encode_work(w, 4, 1, std::span(buf).first(buf.size() - 1)).ok());  // too small
  ASSERT_TRUE(encode_work(w, 4, 1, buf).ok());

  auto bad = buf;  // another magic
  bad[0] = std::byte{0};
  EXPECT_EQ(decode_frame(bad).status().code(), StatusCode::kCorrupt);
  bad = buf;  // another version
  bad[4] = std::byte{9};
  EXPECT_EQ(decode_frame(bad).status().code(), StatusCode::kUnsupported);
  bad = buf;  // an unknown kind
  bad[6] = std::byte{77};
  EXPECT_EQ(decode_frame(bad).status().code(), StatusCode::kCorrupt);
  // A body past the bytes.
  EXPECT_EQ(decode_frame(std::span(buf).first(buf.size() - 4)).status().code(),
            StatusCode::kCorrupt);
  EXPECT_FALSE(decode_frame(std::span(buf).first(5)).ok());
  // A slot naming row 2 of a 2-row batch.
  bad = buf;
  const int32_t row2 = 2;
  std::memcpy(bad.data() + bad.size() - 16, &row2, 4);
  auto f = decode_frame(bad);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(decode_work(*f).status().code(), StatusCode::kCorrupt);
}

}  // namespace
}  // namespace keel::ep
