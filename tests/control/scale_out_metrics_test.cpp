// ScaleOutMetrics (control/scaleout/scale_out_metrics.h): phases land in their buckets, cumulative
// counts, sums and counts in Prometheus text; the event line carries the phases.
#include "control/scaleout/scale_out_metrics.h"

#include <gtest/gtest.h>

namespace keel::control {
namespace {

TEST(ScaleOutMetricsTest, HistogramsCountEachPhase) {
  ScaleOutMetrics m;
  // scaler_pre 0.02 s, pre_load 0.2 s, load 0.03 s, post_load 0.004 s, announce 0.001 s.
  const int64_t ms = 1'000'000;
  m.observe({0, 20 * ms, 220 * ms, 250 * ms, 254 * ms, 255 * ms});
  m.observe({0, 20 * ms, 3220 * ms, 3250 * ms, 3254 * ms, 3255 * ms});  // pre_load 3.2 s
  const std::string t = m.text();
  EXPECT_NE(t.find("# TYPE keel:scale_out_phase_seconds histogram"), std::string::npos);
  EXPECT_NE(t.find("keel:scale_out_phase_seconds_bucket{phase=\"pre_load\",le=\"0.25\"} 1\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("keel:scale_out_phase_seconds_bucket{phase=\"pre_load\",le=\"5\"} 2\n"),
            std::string::npos);
  EXPECT_NE(t.find("keel:scale_out_phase_seconds_bucket{phase=\"pre_load\",le=\"0.1\"} 0\n"),
            std::string::npos);
  EXPECT_NE(t.find("keel:scale_out_phase_seconds_count{phase=\"scaler_pre\"} 2\n"),
            std::string::npos);
  EXPECT_NE(t.find("keel:scale_out_first_token_seconds_bucket{le=\"0.25\"} 0\n"),
            std::string::npos);
  EXPECT_NE(t.find("keel:scale_out_first_token_seconds_bucket{le=\"0.5\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("keel:scale_out_first_token_seconds_count 2\n"), std::string::npos);
}

TEST(ScaleOutMetricsTest, EventLineCarriesThePhases) {
  cluster::BindReply r;
  r.from_store = true;
  r.phases = {1'000'000'000, 1'100'000'000, 1'200'000'000,
              1'300'000'000, 1'400'000'000, 1'500'000'000};
  const cluster::Json e = scale_out_event("warm-te-0", 42, "127.0.0.1:9", r);
  EXPECT_EQ(e["event"], "scale_out");
  EXPECT_EQ(e["te"], "warm-te-0");
  EXPECT_TRUE(e["from_store"].get<bool>());
  EXPECT_NEAR(e["first_token_s"].get<double>(), 0.4, 1e-9);
  EXPECT_NEAR(e["ready_s"].get<double>(), 0.5, 1e-9);
  EXPECT_NEAR(e["phases_s"]["pre_load"].get<double>(), 0.1, 1e-9);
}

}  // namespace
}  // namespace keel::control
