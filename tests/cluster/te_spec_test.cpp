// TeSpec's and JeSpec's codecs: round trips with every field set, defaults for absent fields,
// refusals of malformed specs, and version skew (a newer spec refused by name, unknown fields
// refused).
#include "cluster/protocol/te_spec.h"

#include <gtest/gtest.h>

#include "cluster/protocol/je_spec.h"

namespace keel::cluster {
namespace {

using Json = nlohmann::json;

// A spec with every field away from its default.
TeSpec full_spec() {
  TeSpec s;
  s.id = "m-te-3";
  s.role = "prefill";
  s.model_path = "/models/m.gguf";
  s.served_model_name = "m";
  s.host = "10.0.0.2";
  s.port = 4100;
  s.advertise_host = "node-2";
  s.threads = 6;
  s.isa = "avx2";
  s.store_dir = "/dev/shm/keel";
  s.health_port = 0;
  s.health_hang_ms = 2500;
  s.weights_fault = "flip:0";
  TeEngineSpec& e = s.engine;
  e.max_num_seqs = 8;
  e.max_batched_tokens = 256;
  e.max_waiting = 64;
  e.block_size = 32;
  e.kv_cache_bytes = int64_t{3} << 30;
  e.kv_host_bytes = int64_t{1} << 30;
  e.kv_type = "q8_0";
  e.ctx_size = 4096;
  e.weight_layout = "rows";
  e.use_mmap = true;
  e.prefix_cache = false;
  e.chat_template = "chatml";
  e.chat_template_file = "/t/x.jinja";
  e.loras = {"a=/l/a.gguf", "b=/l/b.gguf"};
  e.pp = 2;
  e.pp_stage1 = "10.0.0.4:4200";
  e.pp_step_timeout_s = 12.5;
  e.ep = 3;  // expert parallelism: members placed on other hosts, or this spec one of them
  e.ep_remote = {"10.0.0.5:4300", "10.0.0.6:4300"};
  e.ep_member = 2;
  e.mode = "semi-pd";
  e.semi_pd = {"2,1", true, 800.0, 80.0, 500, 2, 3, 95.0, 4};
  e.handoff = {"after", 128, "drop:3"};
  e.peer_tier = true;
  e.kv_transfer_throttle_bytes_per_s = 1.5e6;
  e.kv_pin_ttl_s = 30;  // KV kept across tool calls
  e.kv_pin_max_fraction = 0.5;
  e.kv_pin_tenant_max_fraction = 0.25;
  s.membership = {"etcd", {"http://10.0.0.1:2379", "http://10.0.0.3:2379"}, "/keel/c", 7};
  return s;
}

TEST(TeSpecTest, EveryFieldRoundTrips) {
  const TeSpec s = full_spec();
  Result<TeSpec> back = parse_te_spec(te_spec_text(s));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, s);
  EXPECT_EQ(encode_te_spec(s)["v"], kTeSpecVersion);

  Result<TeEngineSpec> engine = decode_te_engine_spec(encode_te_engine_spec(s.engine));
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  EXPECT_EQ(*engine, s.engine);
}

TEST(TeSpecTest, AbsentFieldsTakeTheirDefaults) {
  Result<TeSpec> s = decode_te_spec(Json{{"v", 1}, {"model_path", "/m.gguf"}});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  TeSpec want;
  want.model_path = "/m.gguf";
  EXPECT_EQ(*s, want);
  // A colocated engine encodes no semi-PD part, and reads back equal.
  EXPECT_FALSE(encode_te_engine_spec(TeEngineSpec{}).contains("semi_pd"));
  Result<TeEngineSpec> e = decode_te_engine_spec(Json{{"v", 1}});
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ(*e, TeEngineSpec{});
}

TEST(TeSpecTest, ANewerVersionIsRefusedNamingBothVersions) {
  Json body = encode_te_spec(full_spec());
  body["v"] = kTeSpecVersion + 1;
  Result<TeSpec> s = decode_te_spec(body);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("version 2 is newer than this keel reads (1)"),
            std::string::npos)
      << s.status().message();
  // The engine part travels alone (start_te, bind_model) and is checked the same way, also when
  // nested in a spec of our version.
  Json engine = encode_te_engine_spec(TeEngineSpec{});
  engine["v"] = kTeSpecVersion + 1;
  EXPECT_EQ(decode_te_engine_spec(engine).status().code(), StatusCode::kFailedPrecondition);
  Json nested = encode_te_spec(full_spec());
  nested["engine"] = engine;
  EXPECT_EQ(decode_te_spec(nested).status().code(), StatusCode::kFailedPrecondition);
}

TEST(TeSpecTest, UnknownFieldsAreRefusedByName) {
  Json body = encode_te_spec(full_spec());
  body["gpu_count"] = 8;  // a field a newer keel might send without bumping the version
  Result<TeSpec> s = decode_te_spec(body);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("'gpu_count'"), std::string::npos) << s.status().message();
  body = encode_te_spec(full_spec());
  body["engine"]["handoff"]["window"] = 3;
  s = decode_te_spec(body);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("engine.handoff: 'window'"), std::string::npos)
      << s.status().message();
}

TEST(TeSpecTest, MalformedSpecsAreInvalidArgumentNamingTheField) {
  const auto refused = [](Json body, std::string_view field) {
    Result<TeSpec> s = decode_te_spec(body);
    if (s.ok()) return ::testing::AssertionFailure() << "accepted: " << body.dump();
    if (s.status().code() != StatusCode::kInvalidArgument ||
        s.status().message().find(field) == std::string::npos) {
      return ::testing::AssertionFailure() << s.status().to_string();
    }
    return ::testing::AssertionSuccess();
  };
  const Json ok = {{"v", 1}, {"model_path", "/m.gguf"}};
  const auto with = [&ok](const char* key, Json v) {
    Json b = ok;
    b[key] = std::move(v);
    return b;
  };
  EXPECT_TRUE(refused(Json{{"model_path", "/m.gguf"}}, "no version"));
  EXPECT_TRUE(refused(with("v", 0), "'v'"));
  EXPECT_TRUE(refused(with("v", "1"), "'v'"));
  EXPECT_TRUE(refused(with("role", "trainer"), "'role'"));
  EXPECT_TRUE(refused(with("threads", -1), "'threads'"));
  EXPECT_TRUE(refused(with("port", 70000), "'port'"));
  EXPECT_TRUE(refused(with("isa", "neon"), "'isa'"));
  EXPECT_TRUE(refused(with("id", "a/b"), "'id'"));
  EXPECT_TRUE(refused(with("engine", Json{{"v", 1}, {"kv_type", "q4"}}), "'kv_type'"));
  EXPECT_TRUE(refused(with("engine", Json{{"v", 1}, {"max_num_seqs", 0}}), "'max_num_seqs'"));
  EXPECT_TRUE(refused(with("engine", Json{{"v", 1}, {"loras", {1}}}), "'loras'"));
  EXPECT_TRUE(refused(with("engine", Json{{"v", 1}, {"loras", {"a.gguf"}}}), "NAME=PATH"));
  // More remote expert members than an instance of `ep` processes has, or a member index past it.
  EXPECT_TRUE(refused(with("engine", Json{{"v", 1}, {"ep", 2}, {"ep_remote", {"a:1", "b:2"}}}),
                      "'ep_remote'"));
  EXPECT_TRUE(refused(with("engine", Json{{"v", 1}, {"ep", 2}, {"ep_member", 2}}), "'ep_member'"));
  EXPECT_TRUE(
      refused(with("engine", Json{{"v", 1}, {"handoff", {{"fault", "melt:3"}}}}), "'fault'"));
  EXPECT_TRUE(refused(with("weights_fault", "melt:1"), "'weights_fault'"));
  EXPECT_TRUE(refused(with("engine", Json{{"max_num_seqs", 4}}), "no version"));
  EXPECT_TRUE(refused(with("membership", Json{{"mode", "zookeeper"}}), "'mode'"));
  EXPECT_TRUE(refused(Json{{"v", 1}}, "'model_path'"));  // neither a model nor warm
  EXPECT_TRUE(decode_te_spec(Json{{"v", 1}, {"warm", true}}).ok());
  EXPECT_FALSE(parse_te_spec("--max-num-seqs 8").ok());
  EXPECT_FALSE(parse_te_spec("[1,2]").ok());
}

TEST(JeSpecTest, EveryFieldRoundTripsAndSkewIsRefusedByName) {
  JeSpec s;
  s.id = "m-je-1-mgr";
  s.host = "10.0.0.2";
  s.port = 7001;
  s.tes = {"10.0.0.3:4000", "10.0.0.4:4000"};
  s.model_path = "/m.gguf";
  s.served_model_name = "m";
  s.block_size = 32;
  s.router = "least_load";
  s.balance_threshold = 0.5;
  s.balance_abs_tokens = 2048;
  s.pd_heatmap = "/h.json";
  s.stall_timeout_ms = 9000;
  s.predictor = "/p.gguf";
  s.predictor_model = "/side.gguf";
  s.loras = {"a=/a.gguf"};
  s.te_connect_timeout_ms = 1500;
  s.submit_delay_ms = 5000;
  s.kv_pin_ttl_s = 45;
  s.membership = {"etcd", {"http://e:2379"}, "/keel/x", 5};
  Result<JeSpec> back = parse_je_spec(je_spec_text(s));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, s);

  Result<JeSpec> defaults = decode_je_spec(Json{{"v", 1}, {"model_path", "/m.gguf"}});
  ASSERT_TRUE(defaults.ok()) << defaults.status().to_string();
  JeSpec want;
  want.model_path = "/m.gguf";
  EXPECT_EQ(*defaults, want);

  Json newer = encode_je_spec(s);
  newer["v"] = kJeSpecVersion + 1;
  EXPECT_EQ(decode_je_spec(newer).status().code(), StatusCode::kFailedPrecondition);
  Json unknown = encode_je_spec(s);
  unknown["shards"] = 2;
  EXPECT_NE(decode_je_spec(unknown).status().message().find("'shards'"), std::string::npos);
  Json bad_router = encode_je_spec(s);
  bad_router["router"] = "random";
  EXPECT_NE(decode_je_spec(bad_router).status().message().find("'router'"), std::string::npos);
  Json bad_member = encode_je_spec(s);
  bad_member["membership"]["ttl_s"] = 0;
  EXPECT_NE(decode_je_spec(bad_member).status().message().find("je spec: membership: 'ttl_s'"),
            std::string::npos)
      << decode_je_spec(bad_member).status().message();
  EXPECT_FALSE(decode_je_spec(Json{{"v", 1}}).ok());  // no model
  EXPECT_FALSE(parse_je_spec("--te a:1").ok());
}

}  // namespace
}  // namespace keel::cluster
