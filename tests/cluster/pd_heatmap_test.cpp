// PdHeatmap tests: the file round trip, bilinear lookup and clamping, and precise errors for
// missing files, bad JSON, missing keys, non-numbers, ragged rows, non-increasing or
// out-of-range bins and non-finite values.
#include "cluster/job/pd_heatmap.h"

#include <gtest/gtest.h>

#include <fstream>
#include <limits>

#include "support/test_support.h"

namespace keel::cluster {
namespace {

PdHeatmap make_map() {
  // prefill 100 / 1000 tokens × ratio 0 / 1.
  auto map = PdHeatmap::create({100, 1000}, {0, 1}, {{-1.0, 1.0}, {0.0, 2.0}});
  KEEL_CHECK(map.ok());
  return *std::move(map);
}

// The error message of parsing `json`, which must fail with InvalidArgument.
std::string parse_error(std::string_view json) {
  auto map = PdHeatmap::parse(json);
  if (map.ok()) {
    ADD_FAILURE() << "parsed: " << json;
    return "";
  }
  EXPECT_EQ(map.error().code(), StatusCode::kInvalidArgument) << map.error().to_string();
  return map.error().message();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

TEST(PdHeatmapTest, LookupAtBinsIsExact) {
  const PdHeatmap map = make_map();
  EXPECT_DOUBLE_EQ(map.lookup(100, 0), -1.0);
  EXPECT_DOUBLE_EQ(map.lookup(100, 100), 1.0);  // ratio 1
  EXPECT_DOUBLE_EQ(map.lookup(1000, 0), 0.0);
  EXPECT_DOUBLE_EQ(map.lookup(1000, 1000), 2.0);
}

TEST(PdHeatmapTest, LookupIsBilinearBetweenBins) {
  const PdHeatmap map = make_map();
  EXPECT_DOUBLE_EQ(map.lookup(100, 50), 0.0);    // ratio 0.5 on the first row
  EXPECT_DOUBLE_EQ(map.lookup(550, 0), -0.5);    // halfway between rows, ratio 0
  EXPECT_DOUBLE_EQ(map.lookup(550, 275), 0.5);   // the centre: mean of the four corners
  EXPECT_DOUBLE_EQ(map.lookup(1000, 250), 0.5);  // ratio 0.25 on the second row
}

TEST(PdHeatmapTest, LookupClampsOutsideTheRange) {
  const PdHeatmap map = make_map();
  EXPECT_DOUBLE_EQ(map.lookup(10, 0), -1.0);            // below the first prefill bin
  EXPECT_DOUBLE_EQ(map.lookup(0, 0), -1.0);             // empty prompt
  EXPECT_DOUBLE_EQ(map.lookup(100000, 0), 0.0);         // above the last prefill bin
  EXPECT_DOUBLE_EQ(map.lookup(1000, 1000000), 2.0);     // ratio far above the last bin
  EXPECT_DOUBLE_EQ(map.lookup(100000, 10000000), 2.0);  // both
  EXPECT_DOUBLE_EQ(map.lookup(100, -5), -1.0);          // negative decode counts as 0
}

TEST(PdHeatmapTest, SingleBinTable) {
  auto map = PdHeatmap::create({512}, {0.5}, {{0.25}});
  ASSERT_TRUE(map.ok()) << map.error().to_string();
  EXPECT_DOUBLE_EQ(map->lookup(1, 1), 0.25);
  EXPECT_DOUBLE_EQ(map->lookup(100000, 0), 0.25);
}

TEST(PdHeatmapTest, SaveLoadRoundTrip) {
  PosixFileSystem fs;
  const std::string path = testing::make_temp_dir("pd_heatmap") + "/heatmap.json";
  auto original = PdHeatmap::create({128, 512.5, 4096}, {0, 0.1, 1.0 / 3.0},
                                    {{-0.1, 0.2, 0.3}, {1e-9, -2.5, 3}, {0, 0, 0.123456789012345}});
  ASSERT_TRUE(original.ok()) << original.error().to_string();
  ASSERT_TRUE(original->save(fs, path).ok());
  EXPECT_FALSE(fs.exists(path + ".tmp"));
  auto loaded = PdHeatmap::load(fs, path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
  EXPECT_EQ(loaded->prefill_bins(), original->prefill_bins());
  EXPECT_EQ(loaded->ratio_bins(), original->ratio_bins());
  EXPECT_EQ(loaded->values(), original->values());  // exact: numbers round-trip
}

TEST(PdHeatmapTest, ParsesTheDocumentedFormat) {
  auto map = PdHeatmap::parse(R"({"prefill_bins": [256, 2048], "ratio_bins": [0.0, 2],
                                  "values": [[-0.2, 0.1], [0.4, 0.9]], "comment": "ignored"})");
  ASSERT_TRUE(map.ok()) << map.error().to_string();
  EXPECT_DOUBLE_EQ(map->lookup(2048, 4096), 0.9);
}

TEST(PdHeatmapTest, MissingFileIsNotFound) {
  PosixFileSystem fs;
  const std::string path = testing::make_temp_dir("pd_heatmap") + "/absent.json";
  auto map = PdHeatmap::load(fs, path);
  ASSERT_FALSE(map.ok());
  EXPECT_EQ(map.error().code(), StatusCode::kNotFound) << map.error().to_string();
  EXPECT_NE(map.error().message().find("absent.json"), std::string::npos);
}

TEST(PdHeatmapTest, BadJsonFileNamesThePath) {
  PosixFileSystem fs;
  const std::string path = testing::make_temp_dir("pd_heatmap") + "/bad.json";
  write_text(path, R"({"prefill_bins": [1, 2], )");
  auto map = PdHeatmap::load(fs, path);
  ASSERT_FALSE(map.ok());
  EXPECT_EQ(map.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(map.error().message().find("bad.json"), std::string::npos);
  EXPECT_NE(map.error().message().find("not valid JSON"), std::string::npos)
      << map.error().to_string();
}

TEST(PdHeatmapTest, EmptyFileIsBadJson) {
  PosixFileSystem fs;
  const std::string path = testing::make_temp_dir("pd_heatmap") + "/empty.json";
  write_text(path, "");
  auto map = PdHeatmap::load(fs, path);
  ASSERT_FALSE(map.ok());
  EXPECT_EQ(map.error().code(), StatusCode::kInvalidArgument);
}

TEST(PdHeatmapTest, StructureErrors) {
  EXPECT_NE(parse_error("[1, 2]").find("object"), std::string::npos);
  EXPECT_NE(parse_error(R"({"ratio_bins": [0], "values": [[0]]})").find("\"prefill_bins\""),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"prefill_bins": [1], "values": [[0]]})").find("\"ratio_bins\""),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"prefill_bins": [1], "ratio_bins": [0]})").find("\"values\""),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"prefill_bins": 1, "ratio_bins": [0], "values": [[0]]})")
                .find("prefill_bins must be an array"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"prefill_bins": [1, "x"], "ratio_bins": [0], "values": [[0]]})")
                .find("prefill_bins[1] is not a number"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"prefill_bins": [1], "ratio_bins": [0], "values": [0]})")
                .find("values[0] must be an array"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"prefill_bins": [1], "ratio_bins": [0], "values": [[null]]})")
                .find("values[0][0] is not a number"),
            std::string::npos);
}

TEST(PdHeatmapTest, RaggedRowsAreRejected) {
  const std::string msg =
      parse_error(R"({"prefill_bins": [1, 2], "ratio_bins": [0, 1], "values": [[0, 1], [2]]})");
  EXPECT_NE(msg.find("values[1] has 1 columns but ratio_bins has 2"), std::string::npos) << msg;
  const std::string rows =
      parse_error(R"({"prefill_bins": [1, 2], "ratio_bins": [0, 1], "values": [[0, 1]]})");
  EXPECT_NE(rows.find("values has 1 rows but prefill_bins has 2"), std::string::npos) << rows;
}

TEST(PdHeatmapTest, BinsMustIncreaseStrictly) {
  const std::string equal =
      parse_error(R"({"prefill_bins": [1, 1], "ratio_bins": [0], "values": [[0], [0]]})");
  EXPECT_NE(equal.find("prefill_bins must be strictly increasing: prefill_bins[1]"),
            std::string::npos)
      << equal;
  const std::string decreasing =
      parse_error(R"({"prefill_bins": [1], "ratio_bins": [0, 2, 1], "values": [[0, 0, 0]]})");
  EXPECT_NE(decreasing.find("ratio_bins must be strictly increasing: ratio_bins[2]"),
            std::string::npos)
      << decreasing;
}

TEST(PdHeatmapTest, BinRangesAndValues) {
  EXPECT_NE(parse_error(R"({"prefill_bins": [], "ratio_bins": [0], "values": []})")
                .find("prefill_bins is empty"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"prefill_bins": [0], "ratio_bins": [0], "values": [[0]]})")
                .find("prefill_bins[0] = 0"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"prefill_bins": [1], "ratio_bins": [-0.5], "values": [[0]]})")
                .find("ratio_bins[0]"),
            std::string::npos);
  auto inf = PdHeatmap::create({1}, {0}, {{std::numeric_limits<double>::infinity()}});
  ASSERT_FALSE(inf.ok());
  EXPECT_NE(inf.error().message().find("values[0][0] is not finite"), std::string::npos);
}

}  // namespace
}  // namespace keel::cluster
