// HopTimings: the log line names the request and each reported hop in path order (missing hops
// left out), and the histograms count each hop once per placed request.
#include "cluster/protocol/hop_timings.h"

#include <gtest/gtest.h>

namespace keel::cluster {
namespace {

TEST(HopTimings, DescribeNamesTheRequestAndHopsInPathOrder) {
  const nlohmann::json hops = {{"te_submit", 0.002}, {"je_wait", 5.0}, {"te_call", 0.004}};
  EXPECT_EQ(describe_hops("abc-0", 5.0123, hops),
            "request abc-0 placed in 5.012 s (je_wait 5.000 s, te_call 0.004 s, te_submit "
            "0.002 s)");
  EXPECT_EQ(describe_hops("", 0.5, nlohmann::json::object()),
            "request - placed in 0.500 s (no hops reported)");
  EXPECT_EQ(describe_hops("x", 0.5, nlohmann::json{{"je_wait", "soon"}}),
            "request x placed in 0.500 s (no hops reported)");
}

TEST(HopTimings, HistogramsCountEachHop) {
  HopTimings t;
  t.observe(5.01, {{"je_wait", 5.0}, {"te_call", 0.004}});
  t.observe(0.02, {{"je_wait", 0.001}});
  t.observe(0.01, "not an object");
  const std::string text = t.metrics_text();
  EXPECT_NE(text.find("keel:request_hop_seconds_count{hop=\"placed\"} 3"), std::string::npos)
      << text;
  EXPECT_NE(text.find("keel:request_hop_seconds_count{hop=\"je_wait\"} 2"), std::string::npos);
  EXPECT_NE(text.find("keel:request_hop_seconds_count{hop=\"te_call\"} 1"), std::string::npos);
  EXPECT_NE(text.find("keel:request_hop_seconds_count{hop=\"te_submit\"} 0"), std::string::npos);
  EXPECT_NE(text.find("keel:request_hop_seconds_bucket{hop=\"je_wait\",le=\"5\"} 2"),
            std::string::npos);
}

}  // namespace
}  // namespace keel::cluster
