// The wire codec: every message round-trips with every field set (a field the codec forgets fails
// here), defaults survive being omitted, -inf logprobs and NaN biases cross, and malformed input
// — a wrong version or type, truncation, deep nesting, out-of-range numbers, inconsistent
// histograms, random bytes — is refused with InvalidArgument, never a crash.
#include "engine/wire.h"

#include <gtest/gtest.h>

#include <functional>

#include <cmath>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

namespace keel::engine::wire {
namespace {

using Json = nlohmann::json;

GenerationRequest full_request() {
  GenerationRequest q;
  q.request_id = "req-7";
  q.prompt_tokens = {1, 5, 900, 31999};
  q.sampling.temperature = 0.7f;
  q.sampling.top_k = 40;
  q.sampling.top_p = 0.9f;
  q.sampling.min_p = 0.05f;
  q.sampling.repetition_penalty = 1.1f;
  q.sampling.presence_penalty = -0.5f;
  q.sampling.frequency_penalty = 0.25f;
  q.sampling.logit_bias = {{3, -100.0f}, {7, 2.5f}, {3, -std::numeric_limits<float>::infinity()}};
  q.sampling.seed = std::numeric_limits<uint64_t>::max() - 3;
  q.sampling.logprobs = 5;
  q.sampling.logprobs_source = sampling::LogprobsSource::kProcessed;
  q.max_tokens = 123;
  q.ignore_eos = true;
  q.stop_token_ids = {2, 32000};
  q.stop_strings = {"\n\n", "</s>", "caf\xC3\xA9"};
  q.grammar = "root ::= \"{\" [a-z]* \"}\"";
  q.cache_salt = "tenant\x01\xff";
  q.work_class = WorkClass::kBatch;
  q.priority = -7;
  q.tenant = "alice";
  q.tenant_weight = 2.5;
  q.program = "resp_root01";
  q.keep_kv = true;
  q.lora = "sql-adapter";
  q.retain_as = "cache-abc";
  q.retain_ms = int64_t{1} << 40;
  q.retain_description = "{\"source\":\"messages\"}";
  q.pic_chunks = {{1, 16}, {17, 8}};
  q.pic_link = kv::PicVariant{kv::PicMode::kCacheBlend, 3, 30};
  q.sparse = SparseParams{"raas", 256};
  q.speculative = SpeculativeParams{SpecMethod::kNgram, 5, 4, 2};
  q.early_exit = EarlyExitParams{true, 0.25f, {1, 3}};
  q.resumed_tokens = 2;
  return q;
}

EventFrame full_event() {
  EventFrame f;
  f.key = int64_t{1} << 50;
  f.event.tokens = {17, 18};
  for (int32_t t : {17, 18}) {
    sampling::Logprobs lp;
    lp.chosen = {t, -0.125f * static_cast<float>(t)};
    lp.chosen_rank = 2;
    lp.top = {{t, -0.5f}, {t + 1, -std::numeric_limits<float>::infinity()}};
    f.event.logprobs.push_back(lp);
  }
  f.event.finish = FinishReason::kError;
  f.event.stop_string = 1;
  f.event.error = "forward pass failed";
  f.event.num_prompt_tokens = 4;
  f.event.num_cached_tokens = 2;
  return f;
}

EngineStats full_stats() {
  EngineStats s;
  s.num_running = 1;
  s.num_waiting = 2;
  s.num_tracked = 3;
  s.kv_usage = 0.375f;
  int64_t v = 10;
  for (int64_t* f : {&s.kv_capacity_tokens,
                     &s.prefix_queries_tokens,
                     &s.prefix_hits_tokens,
                     &s.prompt_tokens_total,
                     &s.generation_tokens_total,
                     &s.num_preemptions_total,
                     &s.steps_total,
                     &s.tier_blocks_fetched,
                     &s.tier_blocks_recomputed,
                     &s.tier_transfers_pending,
                     &s.tier_demotions_dropped,
                     &s.peer_decisions_fetch,
                     &s.peer_decisions_recompute,
                     &s.peer_blocks_fetched,
                     &s.peer_hit_tokens,
                     &s.context_cache_blocks,
                     &s.pic_requests,
                     &s.pic_tokens_linked,
                     &s.pic_tokens_recomputed,
                     &s.pic_chunks_compiled,
                     &s.pic_chunks_reused,
                     &s.pic_index_blocks,
                     &s.sparse_requests,
                     &s.sparse_pages_released,
                     &s.sparse_max_pages_held,
                     &s.spec_verify_steps,
                     &s.spec_drafted_tokens,
                     &s.spec_accepted_tokens,
                     &s.spec_emitted_tokens,
                     &s.kv_pinned_blocks,
                     &s.kv_pins_total,
                     &s.kv_pins_released_ttl,
                     &s.kv_pins_released_cap,
                     &s.kv_pins_released_subsumed,
                     &s.kv_pins_released_unused,
                     &s.kv_pins_released_pressure}) {
    *f = v++;
  }
  s.num_context_caches = 4;
  s.tenant_vtc = {{"alice", 1234.5}, {"bob", 0.25}};
  s.num_kv_pins = 5;
  s.tenant_kv_pinned_blocks = {{"alice", 12}, {"bob", 3}};
  s.host_tier_enabled = true;
  s.disk_tier_enabled = true;
  for (kv::TierStats* t : {&s.host_tier, &s.disk_tier}) {
    for (int64_t* f : {&t->blocks, &t->used_bytes, &t->capacity_bytes, &t->hits, &t->misses,
                       &t->bytes_in, &t->bytes_out, &t->evictions, &t->corrupt, &t->write_errors}) {
      *f = v++;
    }
  }
  return s;
}

MetricsSnapshot full_metrics() {
  MetricsSnapshot m;
  double x = 0.5;
  for (HistogramSnapshot* h : {&m.time_to_first_token_seconds, &m.inter_token_latency_seconds,
                               &m.e2e_request_latency_seconds, &m.request_queue_time_seconds,
                               &m.request_prompt_tokens, &m.request_generation_tokens}) {
    h->bounds = {x, 2 * x};
    h->cumulative = {1, 3, 4};
    h->sum = 3 * x;
    h->count = 4;
    x += 1;
  }
  m.request_finished_total = {5, 6, 7, 8};
  return m;
}

TEST(WireTest, GenerationRequestRoundTripsEveryField) {
  const GenerationRequest q = full_request();
  const Bytes bytes = encode(q);
  auto back = decode_request(bytes);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, q);
  EXPECT_EQ(*peek_type(bytes), MessageType::kGenerationRequest);
}

TEST(WireTest, DefaultsSurviveBeingOmitted) {
  GenerationRequest q;
  q.prompt_tokens = {1};
  auto back = decode_request(encode(q));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, q);
  EXPECT_FALSE(back->sampling.seed.has_value());
  EXPECT_FALSE(back->pic_link.has_value());
  EXPECT_FALSE(back->sparse.has_value());
  EXPECT_FALSE(back->speculative.has_value());
  EXPECT_FALSE(back->early_exit.has_value());
  EXPECT_EQ(back->resumed_tokens, 0);  // not sent at 0: a missing field reads as not resumed
  EXPECT_EQ(Json::from_msgpack(encode(q))["body"].count("resumed_tokens"), 0u);
  EXPECT_EQ(back->work_class, WorkClass::kInteractive);  // an older peer's request
  EXPECT_EQ(back->priority, 0);
  // An event without a finish stays unfinished; a default stats/metrics value stays default.
  auto ev = decode_event(encode(EventFrame{3, TokenEvent{}}));
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->key, 3);
  EXPECT_FALSE(ev->event.finish.has_value());
  EXPECT_EQ(*decode_stats(encode(EngineStats{})), EngineStats{});
  EXPECT_EQ(*decode_metrics(encode(MetricsSnapshot{})), MetricsSnapshot{});
}

// KV kept across tool calls crosses the wire (gateway → JE → TE); a frame from a peer that
// predates the field decodes as "do not pin", and a request that does not pin sends nothing.
TEST(WireTest, KeepKvRoundTripsAndAnOlderFrameReadsAsFalse) {
  GenerationRequest q;
  q.prompt_tokens = {1, 2};
  q.keep_kv = true;
  Json j = Json::from_msgpack(encode(q));
  EXPECT_EQ(j["body"]["keep_kv"], true);
  auto back = decode_request(Json::to_msgpack(j));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_TRUE(back->keep_kv);
  j["body"].erase("keep_kv");  // an older peer's frame
  back = decode_request(Json::to_msgpack(j));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_FALSE(back->keep_kv);
  q.keep_kv = false;
  EXPECT_EQ(Json::from_msgpack(encode(q))["body"].count("keep_kv"), 0u);
  j["body"]["keep_kv"] = "yes";  // mistyped: refused naming the field
  back = decode_request(Json::to_msgpack(j));
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.error().message().find("keep_kv"), std::string::npos) << back.error().message();
}

TEST(WireTest, AnUnknownWorkClassIsRefusedByName) {
  GenerationRequest q;
  q.prompt_tokens = {1};
  q.work_class = WorkClass::kTraining;
  Json j = Json::from_msgpack(encode(q));
  EXPECT_EQ(j["body"]["work_class"], "training");
  j["body"]["work_class"] = "urgent";
  const std::vector<uint8_t> bytes = Json::to_msgpack(j);
  auto back = decode_request(bytes);
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.error().message().find("work_class"), std::string::npos) << back.error().message();
}

TEST(WireTest, TokenEventRoundTripsWithInfiniteLogprobs) {
  const EventFrame f = full_event();
  auto back = decode_event(encode(f));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, f);
  EXPECT_TRUE(std::isinf(back->event.logprobs[0].top[1].logprob));
  for (FinishReason r : {FinishReason::kStop, FinishReason::kLength, FinishReason::kAbort}) {
    EventFrame g;
    g.event.finish = r;
    EXPECT_EQ(decode_event(encode(g))->event.finish, r);
  }
}

TEST(WireTest, NanSurvivesAsNan) {
  GenerationRequest q;
  q.prompt_tokens = {1};
  q.sampling.logit_bias = {{4, std::numeric_limits<float>::quiet_NaN()}};
  auto back = decode_request(encode(q));
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->sampling.logit_bias.size(), 1u);
  EXPECT_TRUE(std::isnan(back->sampling.logit_bias[0].second));  // the engine refuses it later
}

TEST(WireTest, StatsAndMetricsRoundTripEveryField) {
  const EngineStats s = full_stats();
  auto stats = decode_stats(encode(s));
  ASSERT_TRUE(stats.ok()) << stats.error().to_string();
  EXPECT_EQ(*stats, s);
  const MetricsSnapshot m = full_metrics();
  auto metrics = decode_metrics(encode(m));
  ASSERT_TRUE(metrics.ok()) << metrics.error().to_string();
  EXPECT_EQ(*metrics, m);
}

// A semi-PD engine's split state crosses the wire (the cluster's load reports) except the
// switch histogram and the controller's predictions, which stay in the process.
TEST(WireTest, SemiPdMetricsCarryTheSplitAndDecisions) {
  MetricsSnapshot m;
  SemiPdMetrics& p = m.semi_pd.emplace();
  p.split_prefill = 3;
  p.split_decode = 2;
  p.prefill_threads = 3;
  p.decode_threads = 1;
  p.num_switches = 7;
  p.decisions = {{"probe_prefill", 2}, {"keep", 5}};
  p.switch_seconds.bounds = {0.001};
  p.switch_seconds.cumulative = {1, 1};
  p.predicted_ttft_s = 0.5;
  auto back = decode_metrics(encode(m));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  ASSERT_TRUE(back->semi_pd.has_value());
  SemiPdMetrics want = p;
  want.switch_seconds = {};
  want.predicted_ttft_s.reset();
  EXPECT_EQ(*back->semi_pd, want);
  // A malformed decision count is refused, not read as zero.
  Json doc = Json::from_msgpack(encode(m));
  doc["body"]["semi_pd"]["decisions"]["keep"] = "five";
  const std::vector<uint8_t> bad = Json::to_msgpack(doc);
  EXPECT_FALSE(decode_metrics(bad).ok());
}

// An MoE model's per-expert counts cross the wire (a TE's load reports, for the gateway's
// /metrics); a grid whose size is not n_layer x n_expert, or a negative count, is refused.
TEST(WireTest, ExpertTokensRoundTripAndMalformedGridsAreRefused) {
  MetricsSnapshot m;
  m.moe_expert_tokens = ExpertTokens{2, 3, {5, 0, 1, 2, 2, 2}};
  auto back = decode_metrics(encode(m));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->moe_expert_tokens, m.moe_expert_tokens);
  EXPECT_FALSE(decode_metrics(encode(MetricsSnapshot{}))->moe_expert_tokens.has_value());
  for (const auto& mutate : std::vector<std::function<void(Json&)>>{
           [](Json& e) { e["tokens"].erase(0); },
           [](Json& e) { e["n_expert"] = 0; },
           [](Json& e) { e["tokens"][1] = -4; },
           [](Json& e) { e["tokens"] = "many"; },
       }) {
    Json doc = Json::from_msgpack(encode(m));
    mutate(doc["body"]["moe_expert_tokens"]);
    EXPECT_FALSE(decode_metrics(Json::to_msgpack(doc)).ok()) << doc.dump();
  }
}

TEST(WireTest, StatusRoundTrips) {
  for (const Status& s : {Status(), Status::resource_exhausted("queue full"),
                          Status::out_of_range("too long"), Status::unavailable("draining")}) {
    Status back = Status::internal("unset");
    ASSERT_TRUE(decode_status(encode(s), &back).ok());
    EXPECT_EQ(back.code(), s.code());
    EXPECT_EQ(back.to_string(), s.to_string());
  }
}

// An envelope with `body` as given, for hand-made malformed messages.
Bytes envelope(Json body, const std::string& type = "generation_request", int64_t v = kVersion) {
  return Json::to_msgpack(Json{{"v", v}, {"type", type}, {"body", std::move(body)}});
}

std::vector<ContextCacheInfo> full_caches() {
  ContextCacheInfo a;
  a.id = "cache-1";
  a.cache_salt = "tenant\x01";
  a.tokens = {1, 2, 31999};
  a.description = "{\"source\":\"prompt\"}";
  a.ttl_ms = 600'000;
  a.created_unix_ms = int64_t{1} << 41;
  ContextCacheInfo b;  // every field at its default
  return {a, b};
}

TEST(WireTest, ContextCachesRoundTrip) {
  for (const std::vector<ContextCacheInfo>& caches :
       {full_caches(), std::vector<ContextCacheInfo>{}}) {
    auto back = decode_caches(encode(caches));
    ASSERT_TRUE(back.ok()) << back.error().to_string();
    EXPECT_EQ(*back, caches);
  }
  EXPECT_EQ(*peek_type(encode(full_caches())), MessageType::kContextCaches);
  auto bad = decode_caches(envelope(Json{{"caches", {1}}}, "context_caches"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("expected objects"), std::string::npos);
}

void expect_invalid(const Result<GenerationRequest>& r, const std::string& needle) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find(needle), std::string::npos) << r.error().message();
}

TEST(WireTest, RefusesOtherVersionsTypesAndShapes) {
  expect_invalid(decode_request(envelope(Json{{"prompt_tokens", {1}}}, "generation_request", 2)),
                 "unsupported version 2");
  expect_invalid(decode_request(envelope(Json::object(), "engine_stats")),
                 "expected a generation_request");
  expect_invalid(decode_request(envelope(Json::object(), "nonsense")), "unknown message type");
  expect_invalid(decode_request(Json::to_msgpack(Json::array({1, 2}))), "a message is a map");
  expect_invalid(decode_request(envelope(Json{{"prompt_tokens", {1, int64_t{1} << 40}}})),
                 "prompt_tokens");
  expect_invalid(decode_request(envelope(Json{{"prompt_tokens", "abc"}})), "expected an array");
  expect_invalid(decode_request(envelope(Json{{"max_tokens", -1.5}})), "expected an integer");
  expect_invalid(decode_request(envelope(Json{{"sampling", {{"logprobs_source", "odd"}}}})),
                 "unknown value \"odd\"");
  expect_invalid(decode_request(envelope(Json{{"sampling", {{"logit_bias", {{1, 2, 3}}}}}})),
                 "pairs");
  expect_invalid(decode_request(envelope(Json{{"pic_chunks", {{1}}}})), "pairs");
  expect_invalid(decode_request(envelope(Json{{"sampling", {{"seed", -4}}}})), "unsigned");
  // A histogram whose buckets do not match its bounds would be read out of range by /metrics.
  Json h = {{"bounds", {1.0, 2.0}}, {"cumulative", {1}}, {"sum", 1.0}, {"count", 1}};
  auto m = decode_metrics(envelope(Json{{"request_prompt_tokens", h}}, "metrics"));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message().find("cumulative"), std::string::npos);
}

TEST(WireTest, RefusesDeepNestingBeforeBuildingIt) {
  // 100,000 nested one-element arrays (0x91 each): refused at kMaxDepth, no stack exhaustion.
  Bytes deep = Json::to_msgpack(Json{{"v", kVersion}, {"type", "token_event"}});
  deep[0] = 0x83;  // the map now announces a third entry: "body" → the nested arrays
  const std::string key = "body";
  deep.push_back(static_cast<uint8_t>(0xA0 | key.size()));
  deep.insert(deep.end(), key.begin(), key.end());
  deep.insert(deep.end(), 100000, 0x91);
  deep.push_back(0xC0);
  auto r = decode_event(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("nesting deeper"), std::string::npos) << r.error().message();
}

TEST(WireTest, EveryTruncationIsRefused) {
  for (const Bytes& full : {encode(full_request()), encode(full_event()), encode(full_stats()),
                            encode(full_metrics()), encode(full_caches())}) {
    for (size_t n = 0; n < full.size(); ++n) {
      const std::span<const uint8_t> prefix(full.data(), n);
      EXPECT_FALSE(peek_type(prefix).ok()) << n;
      EXPECT_FALSE(decode_request(prefix).ok()) << n;
      EXPECT_FALSE(decode_event(prefix).ok()) << n;
      EXPECT_FALSE(decode_caches(prefix).ok()) << n;
    }
  }
}

TEST(WireTest, MutatedMessagesDecodeOrFailCleanly) {
  std::mt19937 rng(12);
  const Bytes seeds[] = {encode(full_request()), encode(full_event()), encode(full_stats()),
                         encode(full_metrics()), encode(full_caches())};
  int decoded = 0;
  for (int i = 0; i < 5000; ++i) {
    Bytes b = seeds[static_cast<size_t>(i) % 5];
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    // Whatever decodes re-encodes to a fixed point.
    if (auto q = decode_request(b); q.ok()) {
      ++decoded;
      EXPECT_EQ(encode(*decode_request(encode(*q))), encode(*q));
    }
    if (auto e = decode_event(b); e.ok()) {
      ++decoded;
      EXPECT_EQ(encode(*decode_event(encode(*e))), encode(*e));
    }
    if (auto s = decode_stats(b); s.ok()) ++decoded;
    if (auto m = decode_metrics(b); m.ok()) ++decoded;
    if (auto c = decode_caches(b); c.ok()) {
      ++decoded;
      EXPECT_EQ(encode(*decode_caches(encode(*c))), encode(*c));
    }
  }
  EXPECT_GT(decoded, 0);  // some mutations only change values
}

}  // namespace
}  // namespace keel::engine::wire
