// Replicated hot experts across a real leader and member: the leader holds shard 0 of 2 plus its
// copies of some of shard 1's experts, the member starts with its range alone and loads its copies
// of shard 0's experts when the hello names them (its reload), and the MoE layer still equals the
// single process bit for bit, decode and batch, while the slots of replicated experts are spread
// over both processes. A member that cannot reload refuses a hello with replicas.
#include <gtest/gtest.h>

#include "core/index_cast.h"
#include "ep/member_thread.h"
#include "ep/replica_plan.h"
#include "model/expert_placement.h"
#include "model/moe_ffn.h"

namespace keel::ep {
namespace {

using std::chrono::milliseconds;
using testing_ep::MemberThread;
using testing_ep::open;
using testing_ep::random_rows;
using testing_ep::write_shape;

// qwen3moe-tiny: 2 layers of 8 experts, top-2. Copies both ways: experts 0 and 1 (shard 0's) on
// shard 1, experts 6 and 7 (shard 1's) on shard 0, in layer 0; expert 2 on shard 1 in layer 1.
model::ExpertPlacement placement() {
  auto p = model::ExpertPlacement::make(2, 2, 8,
                                        {{0, 0, 1}, {0, 1, 1}, {0, 6, 0}, {0, 7, 0}, {1, 2, 1}});
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return *p;
}

TEST(ReplicatedExpertsTest, TheLayerEqualsOneProcessAndTheCopiesShareTheSlots) {
  const std::string path = write_shape("qwen3moe-tiny", DType::kQ8_0);
  const model::ExpertPlacement plan = placement();
  auto whole = open(path, {});
  auto leader = open(path, plan.shard(0));
  auto member = open(path, {1, 2, true});  // its range only: the hello brings the copies
  ASSERT_TRUE(whole && leader && member);
  // The leader's load kept its copies' bytes.
  EXPECT_NE(leader->weights().layers[0].moe.gate[7].data, nullptr);
  EXPECT_EQ(leader->weights().layers[1].moe.gate[7].data, nullptr);
  std::unique_ptr<model::Model> reloaded;
  int reloads = 0;
  MemberThread mt(*member, [&](const model::ExpertShard& next) -> Result<const model::Model*> {
    ++reloads;
    reloaded = open(path, next);
    if (!reloaded) return Status::internal("reload failed");
    return reloaded.get();
  });
  const model::HParams& hp = whole->hparams();
  constexpr int64_t kN = 24;
  std::vector<MemberLink> links;
  links.push_back(mt.link(1));
  auto remote = ChannelRemoteExperts::connect(std::move(links), *leader, 2, kN, milliseconds(10000),
                                              milliseconds(10000), {}, &plan);
  ASSERT_TRUE(remote.ok()) << remote.status().to_string();
  EXPECT_EQ(reloads, 1);
  ASSERT_TRUE(reloaded);
  EXPECT_EQ(reloaded->expert_shard().replicas, plan.shard(1).replicas);

  ThreadPool pool(1);
  kernels::Ops ops(kernels::best_isa(detect_cpu_features()), &pool);
  model::MoeFfn ref(hp, kN), ep(hp, kN);
  std::atomic<int64_t> local{0};
  const std::vector<float> x = random_rows(kN, hp.n_embd, 11);
  int64_t total = 0;
  for (bool overlap : {true, false}) {
    ep.set_expert_parallel({remote->get(), overlap, &plan, &local}, leader->expert_shard());
    for (int64_t n : {int64_t{1}, kN}) {
      for (int64_t layer = 0; layer < hp.n_layer; ++layer) {
        std::vector<float> want(sz(n * hp.n_embd)), got(want.size(), -1.0f);
        ref.forward(whole->weights().layers[sz(layer)].moe, layer, x.data(), n, ops, want.data());
        ep.forward(leader->weights().layers[sz(layer)].moe, layer, x.data(), n, ops, got.data());
        ASSERT_TRUE(ep.take_status().ok());
        EXPECT_EQ(got, want) << "n " << n << " layer " << layer << " overlap " << overlap;
        total += n * hp.moe.n_expert_used;
      }
    }
  }
  const RemoteExpertsStats s = (*remote)->stats();
  ASSERT_EQ(s.member_slots.size(), 1u);
  EXPECT_EQ(local.load() + s.member_slots[0], total);
  EXPECT_EQ(s.member_slots[0], s.slots);
  // Every slot was computed once, by one of the two, and both took part.
  EXPECT_GT(local.load(), 0);
  EXPECT_GT(s.member_slots[0], 0);
}

TEST(ReplicatedExpertsTest, AMemberThatCannotReloadRefusesReplicas) {
  const std::string path = write_shape("qwen3moe-tiny", DType::kF32);
  const model::ExpertPlacement plan = placement();
  auto leader = open(path, plan.shard(0));
  auto member = open(path, {1, 2, true});
  ASSERT_TRUE(leader && member);
  MemberThread mt(*member);  // no reload
  std::vector<MemberLink> links;
  links.push_back(mt.link(1));
  auto remote = ChannelRemoteExperts::connect(std::move(links), *leader, 2, 4, milliseconds(10000),
                                              milliseconds(10000), {}, &plan);
  ASSERT_FALSE(remote.ok());
  EXPECT_EQ(remote.status().code(), StatusCode::kUnsupported) << remote.status().to_string();
  EXPECT_NE(remote.status().message().find("replicated"), std::string::npos);
}

}  // namespace
}  // namespace keel::ep
