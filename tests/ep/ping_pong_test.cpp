// Two ping-pong micro-batches through a whole forward pass (model::Context with remote experts): a
// leader's Context over shard 0 of 2, its member on a thread, gives the single process's logits bit
// for bit — a batch of two prompts, then a decode step of both — with ping-pong on (and counted)
// and off.
#include <gtest/gtest.h>

#include <cstring>

#include "ep/member_thread.h"
#include "model/context.h"
#include "model/kv_storage.h"

namespace keel::ep {
namespace {

using std::chrono::milliseconds;
using testing_ep::MemberThread;
using testing_ep::open;
using testing_ep::write_shape;

model::KvStorage storage_for(const model::Model& m) {
  auto kv = model::KvStorage::create(model::KvLayout::for_model(m.hparams(), 16, DType::kF32), 8);
  EXPECT_TRUE(kv.ok());
  return std::move(*kv);
}

// Two sequences: prompts of 20 and 5 tokens in one batch, then one decode token each.
std::vector<model::Batch> batches() {
  model::Batch prompt, decode;
  for (model::Batch* b : {&prompt, &decode}) {
    b->add_seq({0, 1});
    b->add_seq({2, 3});
  }
  for (int32_t p = 0; p < 20; ++p) prompt.add(1 + (p * 37) % 200, p, 0, p == 19);
  for (int32_t p = 0; p < 5; ++p) prompt.add(3 + p * 11, p, 1, p == 4);
  decode.add(42, 20, 0, true);
  decode.add(17, 5, 1, true);
  return {prompt, decode};
}

TEST(PingPongTest, TheForwardPassEqualsOneProcessBitForBitOnAndOff) {
  const std::string path = write_shape("qwen3moe-tiny", DType::kQ8_0);
  auto whole = open(path, {});
  auto leader = open(path, {0, 2, false});
  auto member = open(path, {1, 2, true});
  ASSERT_TRUE(whole && leader && member);
  MemberThread mt(*member);
  std::vector<MemberLink> links;
  links.push_back(mt.link(1));
  auto remote = ChannelRemoteExperts::connect(std::move(links), *leader, 2, 32, milliseconds(10000),
                                              milliseconds(10000));
  ASSERT_TRUE(remote.ok()) << remote.status().to_string();
  ThreadPool pool(1);
  kernels::Ops ops(kernels::best_isa(detect_cpu_features()), &pool);
  for (bool ping_pong : {true, false}) {
    model::KvStorage kv_whole = storage_for(*whole), kv_ep = storage_for(*leader);
    model::Context one(*whole, 32), ep(*leader, 32);
    std::atomic<int64_t> passes{0};
    ep.set_expert_parallel({remote->get(), true, nullptr, nullptr, ping_pong, &passes});
    for (const model::Batch& b : batches()) {
      std::vector<float> want, got;
      ASSERT_TRUE(one.forward(b, kv_whole, ops, &want).ok());
      ASSERT_TRUE(ep.forward(b, kv_ep, ops, &got).ok());
      ASSERT_EQ(want.size(), got.size());
      EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
          << "ping-pong " << ping_pong << ", batch of " << b.size();
    }
    EXPECT_EQ(passes.load(), ping_pong ? 2 : 0);
  }
}

}  // namespace
}  // namespace keel::ep
