// The scale-out bench's pure part (control/scaleout/scale_bench_report.h): mode lists, the upper
// median, one scale-out's summary from fabricated bind replies (failures counted and named, times
// from the decision, the fork's rates over the chain), the fork's ratios to its yardsticks, and the
// report's text lines.
#include "control/scaleout/scale_bench_report.h"

#include <gtest/gtest.h>

namespace keel::control {
namespace {

using cluster::Json;

constexpr int64_t kSecond = 1'000'000'000;

// A TE bound at decision + `first_token_s` (announced 0.5 s later).
BoundTe bound_te(const std::string& name, double first_token_s, bool from_store) {
  BoundTe te;
  te.name = name;
  te.reply.from_store = from_store;
  const auto at = [](double s) { return static_cast<int64_t>(s * kSecond); };
  te.reply.phases = {
      0, at(0.1), at(0.2), at(first_token_s - 0.1), at(first_token_s), at(first_token_s + 0.5)};
  return te;
}

TEST(ScaleBenchReportTest, ModesParseInOrderAndNameABadOne) {
  Result<std::vector<std::string>> m = parse_scale_modes("fork,cold,store");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(*m, (std::vector<std::string>{"fork", "cold", "store"}));
  const Result<std::vector<std::string>> bad = parse_scale_modes("cold,warm");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().to_string().find("--modes: 'warm' is not cold, store or fork"),
            std::string::npos);
  EXPECT_FALSE(parse_scale_modes("cold,").ok());  // an empty item is not a mode
}

TEST(ScaleBenchReportTest, MedianIsTheUpperMiddle) {
  EXPECT_EQ(median_of({}), 0.0);
  EXPECT_EQ(median_of({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median_of({4.0, 1.0, 3.0, 2.0}), 3.0);
}

TEST(ScaleBenchReportTest, SummaryCountsFailuresAndTimesFromTheDecision) {
  std::vector<Result<BoundTe>> tes;
  tes.emplace_back(bound_te("te-0", 2.0, true));
  tes.emplace_back(Status::unavailable("te-1 did not start"));
  tes.emplace_back(bound_te("te-2", 1.0, false));
  tes.emplace_back(bound_te("te-3", 3.0, true));
  const Json s = summarize_scale_out("store", 0, tes);
  EXPECT_EQ(s["mode"], "store");
  EXPECT_EQ(s["tes"], 4);
  EXPECT_EQ(s["failed"], 1);
  EXPECT_EQ(s["from_store"], 2);
  ASSERT_EQ(s["errors"].size(), 1u);
  EXPECT_NE(s["errors"][0].get<std::string>().find("te-1 did not start"), std::string::npos);
  EXPECT_DOUBLE_EQ(s["time_to_all_ready_s"].get<double>(), 3.5);
  EXPECT_DOUBLE_EQ(s["decision_to_first_token_s"]["min"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(s["decision_to_first_token_s"]["median"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(s["decision_to_first_token_s"]["max"].get<double>(), 3.0);
  EXPECT_NEAR(s["phase_median_s"]["announce"].get<double>(), 0.5, 1e-9);
  EXPECT_FALSE(s.contains("forked"));  // fork fields only for a fork run
}

TEST(ScaleBenchReportTest, AllFailedHasNoTimes) {
  std::vector<Result<BoundTe>> tes;
  tes.emplace_back(Status::internal("no"));
  const Json s = summarize_scale_out("cold", 0, tes);
  EXPECT_EQ(s["failed"], 1);
  EXPECT_FALSE(s.contains("time_to_all_ready_s"));
  EXPECT_FALSE(s.contains("phase_median_s"));
}

TEST(ScaleBenchReportTest, ForkRatesAndRatiosToYardsticks) {
  std::vector<Result<BoundTe>> tes;
  for (double seconds : {2.0, 4.0}) {  // TE 0's hop takes 2 s, the chain's end has it all at 4 s
    BoundTe te = bound_te("fork-te", 5.0, true);
    te.reply.forked = true;
    te.reply.fork_bytes = 8'000'000'000;
    te.reply.fork_seconds = seconds;
    tes.emplace_back(std::move(te));
  }
  BoundTe fell_back = bound_te("fork-te-2", 6.0, false);
  fell_back.reply.fork_error = "source gone";
  tes.emplace_back(std::move(fell_back));
  Json s = summarize_scale_out("fork", 0, tes);
  EXPECT_EQ(s["forked"], 2);
  EXPECT_EQ(s["fork_errors"], Json::array({"source gone"}));
  EXPECT_DOUBLE_EQ(s["fork_gbps_first"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(s["fork_gbps_chain"].get<double>(), 2.0);

  add_fork_ratio({{"gbps", 8.0}}, "fork_vs_probe", true, &s);
  add_fork_ratio({{"gbps", 16.0}}, "fork_vs_fresh_pages", false, &s);
  add_fork_ratio({{"error", "refused"}}, "fork_vs_entry_probe", true, &s);
  EXPECT_DOUBLE_EQ(s["fork_vs_probe_first"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(s["fork_vs_probe_chain"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(s["fork_vs_fresh_pages_first"].get<double>(), 0.25);
  EXPECT_FALSE(s.contains("fork_vs_fresh_pages_chain"));
  EXPECT_FALSE(s.contains("fork_vs_entry_probe_first"));  // a failed yardstick gives no ratio
}

TEST(ScaleBenchReportTest, TextHasAHeaderAndALinePerRun) {
  std::vector<Result<BoundTe>> ok;
  ok.emplace_back(bound_te("te-0", 1.25, true));
  std::vector<Result<BoundTe>> failed;
  failed.emplace_back(Status::internal("no"));
  failed.emplace_back(Status::internal("no"));
  const Json report = {
      {"model", "/m.gguf"},
      {"tes", 2},
      {"threads_per_te", 3},
      {"isa", "avx2"},
      {"runs", {summarize_scale_out("store", 0, ok), summarize_scale_out("cold", 0, failed)}}};
  const std::string text = scale_bench_text(report);
  EXPECT_EQ(text.rfind("model /m.gguf, 2 TEs x 3 threads, avx2\n", 0), 0u) << text;
  EXPECT_NE(text.find("store  ready 1.750 s, decision->first token min 1.250 / median 1.250 s "
                      "(from store 1, failed 0)\n       phases (median s): {\"announce\":0.5,"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\ncold   all 2 TEs failed\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace keel::control
