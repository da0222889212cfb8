// A leader's MoE layer with its remote experts: the leader loads shard 0 of 2, an expert member
// (a shard-1 experts-only load) serves the other half on a thread through a real ShmChannel, and
// the layer's output equals the single process's bit for bit — decode and a batch, overlap on and
// off, with and without a shared expert. A member of another shard is refused at hello; a member
// that goes away fails the layer and every later one with Unavailable.
#include <gtest/gtest.h>

#include "core/cpu_features.h"
#include "core/index_cast.h"
#include "core/thread_pool.h"
#include "ep/channel_remote_experts.h"
#include "ep/member_thread.h"
#include "model/model.h"
#include "model/moe_ffn.h"

namespace keel::ep {
namespace {

using std::chrono::milliseconds;
using testing_ep::MemberThread;
using testing_ep::open;
using testing_ep::random_rows;
using testing_ep::write_shape;

struct Case {
  const char* shape;
  DType type;
};

class RemoteExpertsTest : public ::testing::TestWithParam<Case> {};

TEST_P(RemoteExpertsTest, TheLayerEqualsOneProcessBitForBit) {
  const std::string path = write_shape(GetParam().shape, GetParam().type);
  auto whole = open(path, {});
  auto leader = open(path, {0, 2, false});
  auto member = open(path, {1, 2, true});
  ASSERT_TRUE(whole && leader && member);
  const model::HParams& hp = whole->hparams();
  constexpr int64_t kN = 24;
  MemberThread mt(*member);
  auto remote = ChannelRemoteExperts::connect(
      [&] {
        std::vector<MemberLink> v;
        v.push_back(mt.link(1));
        return v;
      }(),
      *leader, 2, kN, milliseconds(10000), milliseconds(10000));
  ASSERT_TRUE(remote.ok()) << remote.status().to_string();

  ThreadPool pool(1);
  kernels::Ops ops(kernels::best_isa(detect_cpu_features()), &pool);
  model::MoeFfn ref(hp, kN), ep(hp, kN);
  const std::vector<float> x = random_rows(kN, hp.n_embd, 5);
  for (bool overlap : {true, false}) {
    ep.set_expert_parallel({remote->get(), overlap}, leader->expert_shard());
    for (int64_t n : {int64_t{1}, kN}) {
      for (int64_t layer = 0; layer < hp.n_layer; ++layer) {
        std::vector<float> want(sz(n * hp.n_embd)), got(want.size(), -1.0f);
        ref.forward(whole->weights().layers[sz(layer)].moe, layer, x.data(), n, ops, want.data());
        ep.forward(leader->weights().layers[sz(layer)].moe, layer, x.data(), n, ops, got.data());
        ASSERT_TRUE(ep.take_status().ok());
        EXPECT_EQ(got, want) << "n " << n << " layer " << layer << " overlap " << overlap;
      }
    }
  }
  const RemoteExpertsStats s = (*remote)->stats();
  // A call whose slots are all local sends nothing (a decode token may pick only local experts).
  EXPECT_GT(s.calls, 2 * hp.n_layer);
  EXPECT_LE(s.calls, 4 * hp.n_layer);
  EXPECT_GT(s.slots, 0);
  EXPECT_GT(s.member_compute_s, 0.0);
  EXPECT_GE(s.round_trip_s, s.member_compute_s);
  EXPECT_GE(s.exposed_s, 0.0);
  EXPECT_LE(s.exposed_s, s.collect_wait_s);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RemoteExpertsTest,
                         ::testing::Values(Case{"qwen3moe-tiny", DType::kQ8_0},
                                           Case{"qwen2moe-tiny", DType::kF32},
                                           Case{"mixtral-tiny", DType::kQ4_0}));

TEST(RemoteExpertsRefusalTest, AMemberOfAnotherShardIsRefusedAtHello) {
  const std::string path = write_shape("qwen3moe-tiny", DType::kF32);
  auto leader = open(path, {0, 2, false});
  auto member = open(path, {1, 3, true});  // a member of a 3-way instance
  ASSERT_TRUE(leader && member);
  MemberThread mt(*member);
  std::vector<MemberLink> v;
  v.push_back(mt.link(1));
  auto remote = ChannelRemoteExperts::connect(std::move(v), *leader, 2, 4, milliseconds(10000),
                                              milliseconds(10000));
  ASSERT_FALSE(remote.ok());
  EXPECT_EQ(remote.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(remote.status().message().find("differs"), std::string::npos)
      << remote.status().to_string();
}

TEST(RemoteExpertsLossTest, AMemberThatGoesAwayFailsTheLayerAndEveryLaterOne) {
  const std::string path = write_shape("qwen3moe-tiny", DType::kF32);
  auto leader = open(path, {0, 2, false});
  auto member = open(path, {1, 2, true});
  ASSERT_TRUE(leader && member);
  const model::HParams& hp = leader->hparams();
  MemberThread mt(*member);
  std::vector<MemberLink> v;
  v.push_back(mt.link(1));
  auto remote = ChannelRemoteExperts::connect(std::move(v), *leader, 2, 4, milliseconds(10000),
                                              milliseconds(10000));
  ASSERT_TRUE(remote.ok()) << remote.status().to_string();
  ThreadPool pool(1);
  kernels::Ops ops(kernels::Isa::kScalar, &pool);
  model::MoeFfn ep(hp, 4);
  ep.set_expert_parallel({remote->get(), true}, leader->expert_shard());
  const std::vector<float> x = random_rows(4, hp.n_embd, 9);
  std::vector<float> out(x.size());
  const auto& w = leader->weights().layers[0].moe;
  ep.forward(w, 0, x.data(), 4, ops, out.data());
  ASSERT_TRUE(ep.take_status().ok());
  mt.stop();
  EXPECT_EQ(mt.result().code(), StatusCode::kUnavailable);  // it saw its "leader" go
  const auto t0 = std::chrono::steady_clock::now();
  ep.forward(w, 0, x.data(), 4, ops, out.data());
  const Status lost = ep.take_status();
  EXPECT_EQ(lost.code(), StatusCode::kUnavailable) << lost.to_string();
  EXPECT_NE(lost.message().find("test member"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(5000));
  ep.forward(w, 1, x.data(), 4, ops, out.data());
  EXPECT_EQ(ep.take_status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace keel::ep
