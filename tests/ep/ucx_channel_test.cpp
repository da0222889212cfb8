// UcxChannel over loopback: work frames and their replies (small ones and 4 MB ones, which UCX
// sends by rendezvous) between a leader and a listening member on two threads; a member serving
// the MoE layer to one leader after another, bit for bit what one process computes; a member
// that goes away fails the leader's wait; a leader pointed where nothing listens is refused; a
// member learns when its leader's connection is gone.
#include "ep/ucx_channel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "core/cpu_features.h"
#include "core/index_cast.h"
#include "core/thread_pool.h"
#include "ep/channel_remote_experts.h"
#include "ep/expert_frame.h"
#include "ep/expert_member.h"
#include "model/moe_ffn.h"
#include "model/random_model.h"
#include "support/test_support.h"

namespace keel::ep {
namespace {

using std::chrono::milliseconds;

std::unique_ptr<UcxChannel> listen_here() {
  auto ch = UcxChannel::listen("127.0.0.1", 0);
  EXPECT_TRUE(ch.ok()) << ch.status().to_string();
  return ch.ok() ? std::move(*ch) : nullptr;
}

std::string here(const UcxChannel& member) { return "127.0.0.1:" + std::to_string(member.port()); }

TEST(UcxChannelTest, WorkFramesAndRepliesCrossSmallAndLarge) {
  auto member = listen_here();
  ASSERT_NE(member, nullptr);
  ASSERT_GT(member->port(), 0);
  constexpr int64_t kEmbd = 2048, kBig = 512;  // 4 MB of rows: a rendezvous
  auto leader =
      UcxChannel::connect(here(*member), work_frame_bytes(kBig, kBig, kEmbd), milliseconds(10000));
  ASSERT_TRUE(leader.ok()) << leader.status().to_string();
  ASSERT_TRUE(member->reserve(0, outputs_frame_bytes(kBig, kEmbd)).ok());
  const std::vector<int64_t> sizes = {1, kBig, 3, kBig, 1};
  std::thread t([&] {  // doubles every row and answers it as the outputs of one slot per row
    uint32_t seen = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      auto next = member->wait_request(seen, milliseconds(10000), {});
      ASSERT_TRUE(next.ok()) << next.status().to_string();
      seen = *next;
      auto f = decode_frame(member->request());
      ASSERT_TRUE(f.ok()) << f.status().to_string();
      auto w = decode_work(*f);
      ASSERT_TRUE(w.ok()) << w.status().to_string();
      ASSERT_TRUE(encode_outputs(w->n_rows, w->n_embd, 7, f->seq, member->reply()).ok());
      float* ys = outputs_area(member->reply());
      for (int64_t j = 0; j < int64_t{w->n_rows} * w->n_embd; ++j) ys[j] = 2 * w->rows[j];
      member->post_reply();
    }
  });
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t n = sizes[i];
    std::vector<float> rows(sz(n * kEmbd));
    for (size_t j = 0; j < rows.size(); ++j) rows[j] = static_cast<float>(j % 1000) + 0.5f * i;
    std::vector<int32_t> slot_row(sz(n)), slot_expert(sz(n), 0);
    for (int64_t j = 0; j < n; ++j) slot_row[sz(j)] = static_cast<int32_t>(j);
    model::ExpertWork work;
    work.layer = 0;
    work.n_rows = n;
    work.rows = rows.data();
    work.n_slots = n;
    work.slot_row = slot_row.data();
    work.slot_expert = slot_expert.data();
    ASSERT_TRUE(encode_work(work, kEmbd, (*leader)->request_seq() + 1, (*leader)->request()).ok());
    (*leader)->post_request();
    auto r = (*leader)->wait_reply(static_cast<uint32_t>(i), milliseconds(10000), {});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    auto f = decode_frame((*leader)->reply());
    ASSERT_TRUE(f.ok());
    auto out = decode_outputs(*f);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    ASSERT_EQ(out->n_slots, n);
    EXPECT_EQ(out->compute_ns, 7u);
    bool equal = true;
    for (size_t j = 0; j < rows.size(); ++j) equal = equal && out->ys[j] == 2 * rows[j];
    EXPECT_TRUE(equal) << "frame " << i << " of " << n << " rows";
  }
  t.join();
}

TEST(UcxChannelTest, AMemberThatGoesAwayFailsTheWaitAndNothingListeningIsRefused) {
  auto member = listen_here();
  ASSERT_NE(member, nullptr);
  const std::string address = here(*member);
  auto leader = UcxChannel::connect(address, 1 << 16, milliseconds(10000));
  ASSERT_TRUE(leader.ok()) << leader.status().to_string();
  ASSERT_TRUE(encode_bare(FrameKind::kBye, 1, (*leader)->request()).ok());
  (*leader)->post_request();
  auto got = member->wait_request(0, milliseconds(10000), {});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  member.reset();  // the member's process is gone: its endpoints close
  const auto t0 = std::chrono::steady_clock::now();
  auto r = (*leader)->wait_reply(0, milliseconds(30000), {});
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(20000));

  auto nobody = UcxChannel::connect(address, 1 << 16, milliseconds(5000));
  EXPECT_FALSE(nobody.ok());
  EXPECT_EQ(nobody.status().code(), StatusCode::kUnavailable) << nobody.status().to_string();
}

TEST(UcxChannelTest, AMemberKnowsWhenItsLeadersAreGone) {
  auto member = listen_here();
  ASSERT_NE(member, nullptr);
  EXPECT_FALSE(member->leaders_gone()) << "no leader yet: none is gone";
  auto leader = UcxChannel::connect(here(*member), 1 << 16, milliseconds(10000));
  ASSERT_TRUE(leader.ok()) << leader.status().to_string();
  ASSERT_TRUE(encode_bare(FrameKind::kBye, 1, (*leader)->request()).ok());
  (*leader)->post_request();
  ASSERT_TRUE(member->wait_request(0, milliseconds(10000), {}).ok());
  EXPECT_FALSE(member->leaders_gone());
  leader->reset();  // the leader's process is gone: its endpoint closes
  EXPECT_TRUE(
      keel::testing::eventually([&] { return member->leaders_gone(); }, std::chrono::seconds(20)));
}

std::unique_ptr<model::Model> open_shard(const std::string& path, model::ExpertShard shard) {
  model::ModelOptions o;
  o.expert_shard = shard;
  auto m = model::Model::open(path, o);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(*m) : nullptr;
}

TEST(UcxChannelTest, AListeningMemberServesLeaderAfterLeaderBitForBit) {
  model::RandomModelSpec spec;
  spec.shape = *model::find_model_shape("qwen3moe-tiny");
  spec.weight_type = DType::kQ8_0;
  const std::string path = keel::testing::make_temp_dir("ep-ucx") + "/m.gguf";
  {
    ThreadPool pool(1);
    ASSERT_TRUE(model::write_random_model(spec, path, pool).ok());
  }
  auto whole = open_shard(path, {});
  auto leader_model = open_shard(path, {0, 2, false});
  auto member_model = open_shard(path, {1, 2, true});
  ASSERT_TRUE(whole && leader_model && member_model);
  const model::HParams& hp = whole->hparams();

  auto member = listen_here();
  ASSERT_NE(member, nullptr);
  std::atomic<bool> stop{false};
  Status served;
  std::thread t([&] {
    ThreadPool pool(1);
    kernels::Ops ops(kernels::best_isa(detect_cpu_features()), &pool);
    ExpertMemberOptions o;
    o.keep_serving = true;
    o.idle_slice = milliseconds(20);
    o.leader_alive = [&] { return !stop.load(); };  // only to end the test's thread
    served = serve_expert_member(*member_model, *member, ops, o);
  });

  ThreadPool pool(1);
  kernels::Ops ops(kernels::best_isa(detect_cpu_features()), &pool);
  for (const int64_t max_rows : {int64_t{4}, int64_t{16}}) {  // two leaders, one after the other
    const int64_t k = hp.moe.n_expert_used;
    auto ch = UcxChannel::connect(
        here(*member), work_frame_bytes(max_rows, max_rows * k, hp.n_embd), milliseconds(10000));
    ASSERT_TRUE(ch.ok()) << ch.status().to_string();
    std::vector<MemberLink> links;
    links.push_back({std::move(*ch), 1, {}, "member over UCX"});
    auto remote = ChannelRemoteExperts::connect(std::move(links), *leader_model, 2,
                                                static_cast<int32_t>(max_rows), milliseconds(10000),
                                                milliseconds(10000));
    ASSERT_TRUE(remote.ok()) << remote.status().to_string();
    model::MoeFfn ref(hp, max_rows), ep(hp, max_rows);
    ep.set_expert_parallel({remote->get(), true}, leader_model->expert_shard());
    std::mt19937 rng(static_cast<uint32_t>(max_rows));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(sz(max_rows * hp.n_embd));
    for (float& v : x) v = normal(rng);
    for (int64_t layer = 0; layer < hp.n_layer; ++layer) {
      std::vector<float> want(x.size()), got(x.size(), -1.0f);
      ref.forward(whole->weights().layers[sz(layer)].moe, layer, x.data(), max_rows, ops,
                  want.data());
      ep.forward(leader_model->weights().layers[sz(layer)].moe, layer, x.data(), max_rows, ops,
                 got.data());
      ASSERT_TRUE(ep.take_status().ok());
      EXPECT_EQ(got, want) << "max_rows " << max_rows << " layer " << layer;
    }
    EXPECT_GT((*remote)->stats().slots, 0);
  }  // each leader says goodbye; the member keeps serving
  stop = true;
  t.join();
  EXPECT_EQ(served.code(), StatusCode::kUnavailable) << served.to_string();
}

}  // namespace
}  // namespace keel::ep
