// AdmissionQueue (cluster/job/admission.h): the JE's one admission order — work class, then
// priority (lower first), then the tenants' Virtual Token Counters, then arrival — with VTC's
// weights, its lift on arrival, and removal of an aborted job. Pure: no JE, no clock.
#include "cluster/job/admission.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace keel::cluster {
namespace {

using engine::WorkClass;

WaitingJob job(int64_t id, WorkClass c = WorkClass::kInteractive, int32_t priority = 0,
               std::string tenant = "", int64_t prompt = 10) {
  return {JobRef{"g", id}, c, priority, std::move(tenant), prompt};
}

std::vector<int64_t> drain(AdmissionQueue& q) {
  std::vector<int64_t> out;
  while (auto j = q.pop()) out.push_back(j->ref.job);
  return out;
}

TEST(AdmissionQueueTest, ClassThenPriorityThenArrival) {
  AdmissionQueue q;
  ASSERT_TRUE(q.push(job(1, WorkClass::kTraining)));
  ASSERT_TRUE(q.push(job(2, WorkClass::kBatch)));
  ASSERT_TRUE(q.push(job(3, WorkClass::kInteractive, 5)));
  ASSERT_TRUE(q.push(job(4, WorkClass::kInteractive, -1)));
  ASSERT_TRUE(q.push(job(5, WorkClass::kInteractive, 5)));
  ASSERT_TRUE(q.push(job(6, WorkClass::kBatch, -100)));  // priority orders within a class only
  EXPECT_EQ(q.waiting_per_class(), (std::vector<int64_t>{3, 2, 1}));
  EXPECT_EQ(drain(q), (std::vector<int64_t>{4, 3, 5, 6, 2, 1}));
  EXPECT_TRUE(q.empty());
}

TEST(AdmissionQueueTest, AJobIsHeldOnceAndAnAbortedOneLeaves) {
  AdmissionQueue q;
  ASSERT_TRUE(q.push(job(1)));
  EXPECT_FALSE(q.push(job(1)));
  ASSERT_TRUE(q.push(job(2)));
  EXPECT_TRUE(q.holds(JobRef{"g", 2}));
  EXPECT_TRUE(q.remove(JobRef{"g", 1}));
  EXPECT_FALSE(q.remove(JobRef{"g", 1}));
  EXPECT_EQ(drain(q), std::vector<int64_t>{2});
}

// Two backlogged tenants with equal demand alternate; with weights 2:1 the heavier gets twice the
// tokens over a long run (VTC: the smallest counter goes first).
TEST(AdmissionQueueTest, TenantsShareByTheirWeights) {
  AdmissionConfig c;
  c.tenant_weights["a"] = 2.0;
  AdmissionQueue q(c);
  int64_t id = 0;
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(q.push(job(id++, WorkClass::kInteractive, 0, "a", 100)));
    ASSERT_TRUE(q.push(job(id++, WorkClass::kInteractive, 0, "b", 100)));
  }
  std::map<std::string, int64_t> served;
  for (int i = 0; i < 300; ++i) {  // half the backlog: both tenants stay backlogged
    auto j = q.pop();
    ASSERT_TRUE(j.has_value());
    served[j->tenant] += j->prompt_tokens;
  }
  const double ratio = static_cast<double>(served["a"]) / static_cast<double>(served["b"]);
  EXPECT_NEAR(ratio, 2.0, 0.05) << served["a"] << " vs " << served["b"];
  // Each tenant's counter is its tokens over its weight: equal while both are backlogged.
  EXPECT_NEAR(q.counter("a"), q.counter("b"), 100.0);
}

// Generated tokens count too (w_out per token), so a tenant whose jobs generate much waits.
TEST(AdmissionQueueTest, GeneratedTokensAreCharged) {
  AdmissionQueue q;
  ASSERT_TRUE(q.push(job(1, WorkClass::kInteractive, 0, "a", 10)));
  ASSERT_TRUE(q.push(job(2, WorkClass::kInteractive, 0, "b", 10)));
  EXPECT_EQ(q.pop()->tenant, "a");  // equal counters: arrival
  q.charge_generated("a", 500);     // a's job generated 500 tokens meanwhile
  EXPECT_DOUBLE_EQ(q.counter("a"), 10.0 + 2.0 * 500);
  ASSERT_TRUE(q.push(job(3, WorkClass::kInteractive, 0, "a", 10)));
  ASSERT_TRUE(q.push(job(4, WorkClass::kInteractive, 0, "b", 10)));
  EXPECT_EQ(drain(q), (std::vector<int64_t>{2, 4, 3}));
}

// A tenant idle while others were served is lifted to the smallest backlogged counter on its
// return: it does not monopolise the queue with credit saved while idle.
TEST(AdmissionQueueTest, AReturningTenantIsLiftedNotCredited) {
  AdmissionQueue q;
  int64_t id = 0;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(q.push(job(id++, WorkClass::kInteractive, 0, "a")));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(q.pop().has_value());  // a served 50 tokens alone
  EXPECT_DOUBLE_EQ(q.counter("a"), 50.0);
  ASSERT_TRUE(q.push(job(id++, WorkClass::kInteractive, 0, "b")));
  ASSERT_TRUE(q.push(job(id++, WorkClass::kInteractive, 0, "b")));
  EXPECT_DOUBLE_EQ(q.counter("b"), 50.0);  // lifted, not 0
  // From equal counters the two alternate (ties by arrival: a's jobs came first).
  std::vector<std::string> order;
  for (int i = 0; i < 4; ++i) order.push_back(q.pop()->tenant);
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "a", "b"}));
}

// Within a tenant, a job of a new program goes before the next job of a program that has received
// more than a level's service (program_priority.h); the order of one program's jobs is kept; with
// FCFS configured, arrival alone.
std::vector<int64_t> program_order(engine::ProgramScheduling mode) {
  AdmissionConfig c;
  c.programs.mode = mode;
  c.programs.quantum = 100;
  AdmissionQueue q(c);
  WaitingJob first = job(1, WorkClass::kInteractive, 0, "t", 50);
  first.program = "agent";
  EXPECT_TRUE(q.push(first));
  EXPECT_EQ(q.pop()->ref.job, 1);
  q.charge_generated("t", 100, "agent");  // 50 + 2 x 100 = 250: level 2
  EXPECT_DOUBLE_EQ(q.program_service("agent"), 250.0);
  for (int64_t id : {2, 3}) {
    WaitingJob next = job(id, WorkClass::kInteractive, 0, "t", 10);
    next.program = "agent";
    EXPECT_TRUE(q.push(next));
  }
  WaitingJob other = job(4, WorkClass::kInteractive, 0, "t", 10);
  other.program = "chat";
  EXPECT_TRUE(q.push(other));
  return drain(q);
}

TEST(AdmissionQueueTest, ANewProgramGoesBeforeALongProgramsNextJobs) {
  EXPECT_EQ(program_order(engine::ProgramScheduling::kPlas), (std::vector<int64_t>{4, 2, 3}));
  EXPECT_EQ(program_order(engine::ProgramScheduling::kFcfs), (std::vector<int64_t>{2, 3, 4}));
}

}  // namespace
}  // namespace keel::cluster
