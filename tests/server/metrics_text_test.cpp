// Prometheus exposition: every sample line parses, carries the model_name label, follows its
// # HELP / # TYPE lines; histogram buckets are cumulative (monotone) and end at +Inf = _count.
#include "server/metrics_text.h"

#include "engine/metrics.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <map>
#include <sstream>

namespace keel::server {
namespace {

struct Sample {
  std::string name;
  std::string labels;
  double value = 0;
};

bool valid_name(const std::string& n) {
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
  for (char c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != ':') return false;
  }
  return true;
}

// A strict little parser for the subset of the text format render_metrics emits:
// "# HELP name text", "# TYPE name kind", "name{labels} value".
std::vector<Sample> parse_exposition(const std::string& text,
                                     std::map<std::string, std::string>* types) {
  std::vector<Sample> out;
  std::istringstream in(text);
  std::string line, last_help;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      const size_t sp = line.find(' ', 7);
      last_help = line.substr(7, sp == std::string::npos ? std::string::npos : sp - 7);
      EXPECT_TRUE(valid_name(last_help) && sp != std::string::npos) << line;
    } else if (line.rfind("# TYPE ", 0) == 0) {
      const size_t sp = line.find(' ', 7);
      if (sp == std::string::npos) {
        ADD_FAILURE() << line;
        continue;
      }
      const std::string name = line.substr(7, sp - 7), kind = line.substr(sp + 1);
      EXPECT_EQ(last_help, name) << "TYPE without HELP: " << line;
      EXPECT_TRUE(kind == "counter" || kind == "gauge" || kind == "histogram") << line;
      (*types)[name] = kind;
    } else {
      const size_t open = line.find('{'), close = line.find("} ");
      if (open == std::string::npos || close == std::string::npos || close < open) {
        ADD_FAILURE() << "unparseable line: " << line;
        continue;
      }
      Sample smp{line.substr(0, open), line.substr(open + 1, close - open - 1), 0};
      const std::string value = line.substr(close + 2);
      EXPECT_TRUE(valid_name(smp.name)) << line;
      EXPECT_EQ(value.find(' '), std::string::npos) << line;
      smp.value = value == "+Inf" ? HUGE_VAL : std::stod(value);
      out.push_back(std::move(smp));
    }
  }
  return out;
}

std::string family_of(const std::string& sample, const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s(suffix);
    if (sample.size() > s.size() && sample.compare(sample.size() - s.size(), s.size(), s) == 0) {
      const std::string base = sample.substr(0, sample.size() - s.size());
      if (types.count(base) && types.at(base) == "histogram") return base;
    }
  }
  return sample;
}

TEST(MetricsTextTest, RendersParsableExpositionWithVllmNames) {
  engine::Metrics m;
  for (double v : {0.002, 0.03, 0.03, 1.5, 5000.0}) m.time_to_first_token_seconds.observe(v);
  m.request_prompt_tokens.observe(12);
  m.count_finished(engine::FinishReason::kStop);
  m.count_finished(engine::FinishReason::kStop);
  m.count_finished(engine::FinishReason::kLength);
  engine::EngineStats stats;
  stats.num_running = 3;
  stats.num_waiting = 2;
  stats.kv_usage = 0.5f;
  stats.prefix_queries_tokens = 100;
  stats.prefix_hits_tokens = 40;
  stats.prompt_tokens_total = 500;
  stats.generation_tokens_total = 77;
  stats.num_preemptions_total = 1;
  stats.num_context_caches = 2;
  stats.context_cache_blocks = 9;
  stats.kv_blocks_used = 12;
  stats.kv_blocks_total = 24;
  const std::string text = render_metrics(stats, m.snapshot(), "my \"model\"");

  std::map<std::string, std::string> types;
  const std::vector<Sample> samples = parse_exposition(text, &types);
  ASSERT_FALSE(samples.empty());
  std::map<std::string, double> plain;
  for (const Sample& s : samples) {
    EXPECT_NE(s.labels.find(R"(model_name="my \"model\"")"), std::string::npos) << s.name;
    EXPECT_TRUE(types.count(family_of(s.name, types))) << "no TYPE for " << s.name;
    if (s.labels.find(',') == std::string::npos) plain[s.name] = s.value;
  }
  EXPECT_EQ(types["keel:num_requests_running"], "gauge");
  EXPECT_EQ(plain["keel:num_requests_running"], 3);
  EXPECT_EQ(plain["keel:num_requests_waiting"], 2);
  EXPECT_EQ(plain["keel:kv_cache_usage_perc"], 0.5);
  EXPECT_EQ(types["keel:prefix_cache_queries_total"], "counter");
  EXPECT_EQ(plain["keel:prefix_cache_queries_total"], 100);
  EXPECT_EQ(plain["keel:prefix_cache_hits_total"], 40);
  EXPECT_EQ(plain["keel:prompt_tokens_total"], 500);
  EXPECT_EQ(plain["keel:generation_tokens_total"], 77);
  EXPECT_EQ(plain["keel:num_preemptions_total"], 1);
  EXPECT_EQ(plain["keel:context_caches"], 2);
  EXPECT_EQ(plain["keel:context_cache_blocks"], 9);
  EXPECT_EQ(plain["keel:kv_blocks_used"], 12);
  EXPECT_EQ(plain["keel:kv_blocks_total"], 24);
  for (const char* h :
       {"time_to_first_token_seconds", "inter_token_latency_seconds", "e2e_request_latency_seconds",
        "request_queue_time_seconds", "request_prompt_tokens", "request_generation_tokens"}) {
    EXPECT_EQ(types[std::string("keel:") + h], "histogram") << h;
  }
  std::map<std::string, double> success;
  for (const Sample& s : samples) {
    if (s.name != "keel:request_success_total") continue;
    const size_t p = s.labels.find("finished_reason=\"");
    ASSERT_NE(p, std::string::npos);
    success[s.labels.substr(p + 17, s.labels.find('"', p + 17) - p - 17)] = s.value;
  }
  EXPECT_EQ(success["stop"], 2);
  EXPECT_EQ(success["length"], 1);
  EXPECT_EQ(success["abort"], 0);
}

TEST(MetricsTextTest, KvTierSeriesOnlyForConfiguredTiersWithATierLabel) {
  engine::Metrics m;
  engine::EngineStats stats;
  std::map<std::string, std::string> types;
  for (const Sample& s : parse_exposition(render_metrics(stats, m.snapshot(), "x"), &types)) {
    EXPECT_EQ(s.name.find("kv_tier"), std::string::npos) << "no tiers configured: " << s.name;
  }
  stats.host_tier_enabled = true;
  stats.host_tier.hits = 3;
  stats.host_tier.blocks = 7;
  stats.disk_tier_enabled = true;
  stats.disk_tier.corrupt = 2;
  stats.disk_tier.bytes_in = 4096;
  stats.disk_tier.write_errors = 9;
  stats.tier_blocks_fetched = 5;
  stats.tier_blocks_recomputed = 6;
  stats.tier_transfers_pending = 2;
  stats.tier_demotions_dropped = 4;
  std::map<std::string, double> v;
  for (const Sample& s : parse_exposition(render_metrics(stats, m.snapshot(), "x"), &types)) {
    if (s.name == "keel:kv_tier_decisions_total") {
      const size_t p = s.labels.find("decision=\"");
      ASSERT_NE(p, std::string::npos);
      v[s.labels.substr(p + 10, s.labels.find('"', p + 10) - p - 10)] = s.value;
      continue;
    }
    if (s.name == "keel:kv_tier_transfers_pending" ||
        s.name == "keel:kv_tier_demotions_dropped_total") {
      v[s.name] = s.value;
      continue;
    }
    const size_t p = s.labels.find("tier=\"");
    if (s.name.find("kv_tier") == std::string::npos) continue;
    ASSERT_NE(p, std::string::npos) << s.name;
    v[s.name + "/" + s.labels.substr(p + 6, s.labels.find('"', p + 6) - p - 6)] = s.value;
  }
  EXPECT_EQ(v["keel:kv_tier_hits_total/host"], 3);
  EXPECT_EQ(v["keel:kv_tier_blocks/host"], 7);
  EXPECT_EQ(v["keel:kv_tier_corrupt_total/disk"], 2);
  EXPECT_EQ(v["keel:kv_tier_bytes_in_total/disk"], 4096);
  EXPECT_EQ(v.count("keel:kv_tier_evictions_total/disk"), 1u);
  EXPECT_EQ(v["keel:kv_tier_write_errors_total/disk"], 9);
  EXPECT_EQ(v["keel:kv_tier_write_errors_total/host"], 0);
  EXPECT_EQ(v["fetch"], 5);
  EXPECT_EQ(v["recompute"], 6);
  EXPECT_EQ(v["keel:kv_tier_transfers_pending"], 2);
  EXPECT_EQ(v["keel:kv_tier_demotions_dropped_total"], 4);
  EXPECT_EQ(types["keel:kv_tier_hits_total"], "counter");
  EXPECT_EQ(types["keel:kv_tier_used_bytes"], "gauge");
}

// Tier T3's counters (filled by a TE shell): decisions by label, blocks and tokens fetched;
// rendered with the tier series (a T3 TE always has a host tier).
TEST(MetricsTextTest, PeerTierCountersAreExported) {
  engine::Metrics m;
  engine::EngineStats stats;
  stats.host_tier_enabled = true;
  stats.peer_decisions_fetch = 3;
  stats.peer_decisions_recompute = 2;
  stats.peer_blocks_fetched = 11;
  stats.peer_hit_tokens = 176;
  std::map<std::string, std::string> types;
  std::map<std::string, double> v;
  for (const Sample& s : parse_exposition(render_metrics(stats, m.snapshot(), "x"), &types)) {
    if (s.name.find("kv_peer") == std::string::npos) continue;
    const size_t p = s.labels.find("decision=\"");
    const std::string decision =
        p == std::string::npos ? "" : s.labels.substr(p + 10, s.labels.find('"', p + 10) - p - 10);
    v[s.name + "/" + decision] = s.value;
  }
  EXPECT_EQ(v["keel:kv_peer_decisions_total/fetch"], 3) << v.size();
  EXPECT_EQ(v["keel:kv_peer_decisions_total/recompute"], 2);
  EXPECT_EQ(v["keel:kv_peer_blocks_fetched_total/"], 11);
  EXPECT_EQ(v["keel:kv_peer_hit_tokens_total/"], 176);
  EXPECT_EQ(types["keel:kv_peer_hit_tokens_total"], "counter");
}

TEST(MetricsTextTest, KvPinSeriesAreExported) {
  engine::Metrics m;
  engine::EngineStats stats;
  stats.num_kv_pins = 2;
  stats.kv_pinned_blocks = 40;
  stats.tenant_kv_pinned_blocks = {{"alice", 30}, {"b\"ob", 10}};
  stats.kv_pins_total = 9;
  stats.kv_pins_released_ttl = 4;
  stats.kv_pins_released_cap = 1;
  stats.kv_pins_released_subsumed = 0;
  stats.kv_pins_released_unused = 2;
  stats.kv_pins_released_pressure = 3;
  std::map<std::string, std::string> types;
  std::map<std::string, double> v;
  for (const Sample& s : parse_exposition(render_metrics(stats, m.snapshot(), "x"), &types)) {
    if (s.name.find("kv_pin") == std::string::npos && s.name.find("pinned") == std::string::npos) {
      continue;
    }
    const size_t comma = s.labels.find(',');
    v[s.name + "/" + (comma == std::string::npos ? "" : s.labels.substr(comma + 1))] = s.value;
  }
  EXPECT_EQ(v["keel:kv_pins/"], 2) << v.size();
  EXPECT_EQ(v["keel:kv_pinned_blocks/"], 40);
  EXPECT_EQ(v["keel:kv_tenant_pinned_blocks/tenant=\"alice\""], 30);
  EXPECT_EQ(v["keel:kv_tenant_pinned_blocks/tenant=\"b\\\"ob\""], 10);
  EXPECT_EQ(v["keel:kv_pins_total/"], 9);
  EXPECT_EQ(v["keel:kv_pins_released_total/reason=\"ttl\""], 4);
  EXPECT_EQ(v["keel:kv_pins_released_total/reason=\"cap\""], 1);
  EXPECT_EQ(v["keel:kv_pins_released_total/reason=\"subsumed\""], 0);
  EXPECT_EQ(v["keel:kv_pins_released_total/reason=\"unused\""], 2);
  EXPECT_EQ(v["keel:kv_pins_released_total/reason=\"pressure\""], 3);
  EXPECT_EQ(types["keel:kv_pins_released_total"], "counter");
  EXPECT_EQ(types["keel:kv_pinned_blocks"], "gauge");
}

TEST(MetricsTextTest, HistogramBucketsAreCumulativeAndEndAtCount) {
  engine::Metrics m;
  const double values[] = {0.0005, 0.002, 0.03, 0.03, 1.5, 5000.0};
  double sum = 0;
  for (double v : values) {
    m.time_to_first_token_seconds.observe(v);
    sum += v;
  }
  const std::string text = render_metrics(engine::EngineStats{}, m.snapshot(), "m");
  std::map<std::string, std::string> types;
  const std::vector<Sample> samples = parse_exposition(text, &types);
  std::vector<std::pair<double, double>> buckets;  // (le, count)
  double count = -1, total = -1;
  for (const Sample& s : samples) {
    if (s.name == "keel:time_to_first_token_seconds_bucket") {
      const size_t p = s.labels.find("le=\"");
      ASSERT_NE(p, std::string::npos);
      const std::string le = s.labels.substr(p + 4, s.labels.find('"', p + 4) - p - 4);
      buckets.emplace_back(le == "+Inf" ? HUGE_VAL : std::stod(le), s.value);
    } else if (s.name == "keel:time_to_first_token_seconds_count") {
      count = s.value;
    } else if (s.name == "keel:time_to_first_token_seconds_sum") {
      total = s.value;
    }
  }
  ASSERT_GE(buckets.size(), 2u);
  for (size_t i = 1; i < buckets.size(); ++i) {
    EXPECT_LT(buckets[i - 1].first, buckets[i].first);
    EXPECT_LE(buckets[i - 1].second, buckets[i].second);
  }
  EXPECT_TRUE(std::isinf(buckets.back().first));
  EXPECT_EQ(buckets.back().second, 6);
  EXPECT_EQ(count, 6);
  EXPECT_NEAR(total, sum, 1e-9);
  // le=0.001 holds only the 0.0005 observation; le=0.005 also the 0.002 one.
  EXPECT_EQ(buckets[0].first, 0.001);
  EXPECT_EQ(buckets[0].second, 1);
  EXPECT_EQ(buckets[1].second, 2);
}

}  // namespace
}  // namespace keel::server
