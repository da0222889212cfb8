// Test support for the ep tests: random MoE files, sharded loads, random rows, and an expert
// member serving on its own thread through a real ShmChannel.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "ep/channel_remote_experts.h"
#include "ep/expert_member.h"
#include "ep/shm_channel.h"
#include "model/model.h"
#include "model/random_model.h"
#include "support/test_support.h"

namespace keel::ep::testing_ep {

using std::chrono::milliseconds;

inline std::string write_shape(const std::string& shape, DType type) {
  model::RandomModelSpec spec;
  spec.shape = *model::find_model_shape(shape);
  spec.weight_type = type;
  const std::string path = keel::testing::make_temp_dir("ep-" + shape) + "/m.gguf";
  ThreadPool pool(1);
  const Status st = model::write_random_model(spec, path, pool);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return path;
}

inline std::unique_ptr<model::Model> open(const std::string& path, model::ExpertShard shard) {
  model::ModelOptions o;
  o.expert_shard = shard;
  auto m = model::Model::open(path, o);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(*m) : nullptr;
}

inline std::vector<float> random_rows(int64_t n, int64_t d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * d));
  for (float& v : x) v = normal(rng);
  return x;
}

// A member serving `model` on its own thread, and the leader's link to it.
class MemberThread {
 public:
  // reload: ExpertMemberOptions::reload (empty: replicas refused).
  explicit MemberThread(
      const model::Model& model,
      std::function<Result<const model::Model*>(const model::ExpertShard&)> reload = {})
      : pool_(1), ops_(kernels::best_isa(detect_cpu_features()), &pool_) {
    auto ch = ShmChannel::create(1 << 20, 1 << 20);
    EXPECT_TRUE(ch.ok());
    leader_end_ = std::move(*ch);
    auto member = ShmChannel::attach(leader_end_->name());
    EXPECT_TRUE(member.ok());
    member_end_ = std::move(*member);
    thread_ = std::thread([this, &model, reload = std::move(reload)] {
      ExpertMemberOptions o;
      o.idle_slice = milliseconds(20);
      o.leader_alive = [this] { return !dead_.load(); };
      o.reload = reload;
      result_ = serve_expert_member(model, *member_end_, ops_, o);
    });
  }
  ~MemberThread() { stop(); }
  // The link to this member (once).
  MemberLink link(int32_t shard) {
    return {std::move(leader_end_), shard, [this] { return !dead_.load(); }, "test member"};
  }
  // The member leaves (as if its process died) and is joined.
  void stop() {
    dead_ = true;
    if (thread_.joinable()) thread_.join();
  }
  [[nodiscard]] const Status& result() const { return result_; }

 private:
  ThreadPool pool_;
  kernels::Ops ops_;
  std::unique_ptr<ShmChannel> leader_end_, member_end_;
  std::atomic<bool> dead_{false};
  Status result_;
  std::thread thread_;
};

}  // namespace keel::ep::testing_ep
