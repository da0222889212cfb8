// control/up/up_plan.h: what `keel cluster up` starts, worked out from its options with no
// process — TE kinds and counts, threads, each TE's and JE's spec, the flag-combination checks;
// and the serve options' round trip through a TE spec's engine part (host/serve_options.h).
#include "control/up/up_plan.h"

#include <gtest/gtest.h>

#include "control/up/up_scaling.h"

namespace keel::control {
namespace {

TEST(UpPlanTest, ColocatedByDefaultAndNoneBesidePrefillDecodeOrSemiPd) {
  ClusterUpOptions o;
  EXPECT_EQ(te_kinds(o), (std::vector<std::string>{"colocated", "colocated"}));
  o.prefill = 1;
  o.decode = 2;
  EXPECT_EQ(te_kinds(o), (std::vector<std::string>{"prefill", "decode", "decode"}));
  o.semi_pd = 1;
  o.colocated = 1;
  EXPECT_EQ(te_kinds(o),
            (std::vector<std::string>{"colocated", "semi-pd", "prefill", "decode", "decode"}));
  EXPECT_EQ(initial_tes(o), 5);
  ClusterUpOptions scaled;
  scaled.autoscale.max_replicas = 4;
  scaled.autoscale.min_replicas = 1;
  EXPECT_TRUE(autoscaling(scaled));
  EXPECT_FALSE(role_autoscaling(scaled));
  EXPECT_EQ(colocated_tes(scaled), 1);  // --min at start-up
}

TEST(UpPlanTest, ThreadsSplitOverEveryProcessAtItsMax) {
  ClusterUpOptions o;
  o.threads_per_te = 3;
  EXPECT_EQ(threads_per_te(o), 3);
  o.threads_per_te = 0;
  o.colocated = 1;
  o.autoscale.max_replicas = 1'000'000;  // counts at its max: one thread each at least
  EXPECT_EQ(threads_per_te(o), 1);
}

TEST(UpPlanTest, TeSpecCarriesTheEngineOfItsKind) {
  ClusterUpOptions o;
  o.serve.max_num_seqs = 7;
  o.serve.kv_type = "q8_0";
  o.serve.semi_pd_split = "1,2";
  o.handoff.prefill_chunk = 64;
  o.peer.enabled = true;
  o.store_dir = "/dev/shm/x";
  const cluster::TeSpec prefill = te_spec(o, "/m.gguf", "m", 3, 2, "prefill");
  EXPECT_EQ(prefill.id, "te-3");
  EXPECT_EQ(prefill.role, "prefill");
  EXPECT_EQ(prefill.threads, 2);
  EXPECT_EQ(prefill.store_dir, "/dev/shm/x");
  EXPECT_EQ(prefill.engine.max_num_seqs, 7);
  EXPECT_EQ(prefill.engine.kv_type, "q8_0");
  EXPECT_EQ(prefill.engine.handoff.prefill_chunk, 64);  // only a prefill TE hands off
  EXPECT_TRUE(prefill.engine.peer_tier);
  EXPECT_EQ(prefill.engine.mode, "colocated");
  EXPECT_EQ(prefill.engine.semi_pd, cluster::TeEngineSpec{}.semi_pd);  // not a semi-PD TE
  const cluster::TeSpec decode = te_spec(o, "/m.gguf", "m", 4, 2, "decode");
  EXPECT_EQ(decode.engine.handoff.prefill_chunk, cluster::TeEngineSpec{}.handoff.prefill_chunk);
  const cluster::TeSpec semi = te_spec(o, "/m.gguf", "m", 5, 2, "semi-pd");
  EXPECT_EQ(semi.role, "colocated");
  EXPECT_EQ(semi.engine.mode, "semi-pd");
  EXPECT_EQ(semi.engine.semi_pd.split, "1,2");
  const cluster::TeSpec warm = warm_te_spec(o, "/m.gguf", "m", 2);
  EXPECT_TRUE(warm.warm);
  o.te_stores = "/dev/shm/pool";
  EXPECT_TRUE(warm_te_spec(o, "/m.gguf", "m", 2).store_dir.empty());  // the pool gives its own
}

TEST(UpPlanTest, JeIdsCarryModelAndManagerOnlyUnderNodesAuto) {
  ClusterUpOptions o;
  EXPECT_EQ(je_id(o, "m", 1, "mgr"), "je-1");
  o.nodes = "auto";
  EXPECT_EQ(je_id(o, "m", 1, "mgr"), "m-je-1-mgr");
  o.router = "least-load";
  o.je_submit_delay_ms = 5;
  const cluster::JeSpec je = je_spec(o, "/m.gguf", "m", "je-0", {"127.0.0.1:1"});
  EXPECT_EQ(je.router, "least-load");
  EXPECT_EQ(je.submit_delay_ms, 5);
  EXPECT_EQ(je.tes, std::vector<std::string>{"127.0.0.1:1"});
}

TEST(UpPlanTest, RefusesFlagCombinationsByName) {
  ClusterUpOptions o;
  o.autoscale.max_prefill = 2;
  Status s = check_role_autoscaling(o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--prefill and --decode"), std::string::npos) << s.message();
  o.prefill = 3;
  o.decode = 1;
  s = check_role_autoscaling(o);  // start-up count above the max
  EXPECT_NE(s.message().find("--max-prefill 2"), std::string::npos) << s.message();
  o.prefill = 1;
  EXPECT_TRUE(check_role_autoscaling(o).ok());
  ClusterUpOptions pp;
  pp.serve.pp = 2;
  EXPECT_TRUE(check_pipelined(pp).ok());
  pp.semi_pd = 1;
  EXPECT_NE(check_pipelined(pp).message().find("--semi-pd"), std::string::npos);
}

TEST(UpPlanTest, AutoscaleGroupsPerRoleWithTheirObjectives) {
  AutoscaleOptions a;
  a.max_replicas = 3;
  a.max_prefill = 2;
  a.max_decode = 4;
  a.ttft_slo_ms = 500;
  a.tpot_slo_ms = 50;
  a.stable_window_s = 60;
  const std::vector<AutoscaleGroupConfig> g = autoscale_groups(a);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].policy.max_replicas, 3);
  EXPECT_DOUBLE_EQ(g[0].policy.panic_window_s, 6.0);  // 10 % of the stable window
  EXPECT_DOUBLE_EQ(g[1].policy.tpot_slo_s, 0.0);      // prefill: the TTFT objective only
  EXPECT_DOUBLE_EQ(g[1].policy.ttft_slo_s, 0.5);
  EXPECT_DOUBLE_EQ(g[2].policy.ttft_slo_s, 0.0);  // decode: the TPOT one only
  EXPECT_DOUBLE_EQ(g[2].policy.tpot_slo_s, 0.05);
  a.max_replicas = 0;
  EXPECT_EQ(autoscale_groups(a).size(), 2u);
}

TEST(ServeOptionsTest, EngineSpecRoundTripsAndMapsOntoTheEngine) {
  host::ServeOptions s;
  s.max_num_seqs = 5;
  s.kv_type = "f16";
  s.no_prefix_cache = true;
  s.loras = {"a=/x.gguf"};
  s.mode = "semi-pd";
  s.semi_pd_split = "1,1";
  s.semi_pd_window_ms = 250;
  const cluster::TeEngineSpec e = host::te_engine_spec_of(s);
  EXPECT_FALSE(e.prefix_cache);
  host::ServeOptions back;
  host::apply_engine_spec(e, &back);
  EXPECT_EQ(host::te_engine_spec_of(back), e);
  const engine::EngineConfig c = host::serve_engine_config(back);
  EXPECT_EQ(c.scheduler.max_num_seqs, 5);
  EXPECT_EQ(c.kv_dtype, DType::kF16);
  EXPECT_FALSE(c.enable_prefix_cache);
  EXPECT_TRUE(c.semi_pd.has_value());
  back.semi_pd_dynamic = true;
  back.mode = "colocated";
  EXPECT_EQ(host::semi_pd_controller_config(back, 2).status().code(), StatusCode::kInvalidArgument);
}

// --draft-model alone turns draft-model speculation on (llama.cpp's -md); --speculative decides
// when given.
TEST(ServeOptionsTest, DraftModelAloneTurnsDraftModelSpeculationOn) {
  host::ServeOptions s;
  EXPECT_EQ(host::serve_engine_config(s).speculative.method, engine::SpecMethod::kNone);
  s.draft_model = "/d.gguf";
  engine::EngineConfig c = host::serve_engine_config(s);
  EXPECT_EQ(c.speculative.method, engine::SpecMethod::kDraftModel);
  EXPECT_EQ(c.draft_model_path, "/d.gguf");
  s.speculative = "none";
  EXPECT_EQ(host::serve_engine_config(s).speculative.method, engine::SpecMethod::kNone);
  s.speculative = "ngram";
  EXPECT_EQ(host::serve_engine_config(s).speculative.method, engine::SpecMethod::kNgram);
}

}  // namespace
}  // namespace keel::control
