// Program-aware admission (engine/program_priority.h, Autellix's PLAS): the levels, the pick, the
// charges and the table's cap alone; a simulated overloaded batch of short and long agent programs
// (short programs finish sooner than under first-come-first-served, long ones are not starved);
// and the Scheduler admitting a new program's call before a long program's next one (FCFS when
// configured so, and a starving call lifted).
#include "engine/program_priority.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "sim_util.h"

namespace keel::engine {
namespace {

ProgramSchedulingConfig plas() {
  ProgramSchedulingConfig c;
  c.quantum = 100;
  c.levels = 4;
  c.starvation_factor = 10;
  return c;
}

TEST(ProgramPriorityTest, LevelsDoubleFromTheQuantumAndStopAtTheLast) {
  const ProgramSchedulingConfig c = plas();
  EXPECT_EQ(program_level(c, 0, 0), 0);
  EXPECT_EQ(program_level(c, 99, 0), 0);
  EXPECT_EQ(program_level(c, 100, 0), 1);
  EXPECT_EQ(program_level(c, 199, 0), 1);
  EXPECT_EQ(program_level(c, 200, 0), 2);
  EXPECT_EQ(program_level(c, 1e9, 0), 3);
  // Starving: more than 10 x (service + quantum) served to others while it waited.
  EXPECT_EQ(program_level(c, 200, 3000), 2);
  EXPECT_EQ(program_level(c, 200, 3001), 0);
}

TEST(ProgramPriorityTest, PicksTheEarliestCallOfTheLeastServedLevel) {
  ProgramSchedulingConfig c = plas();
  ProgramServiceTable t;
  program_charge(c, &t, "long", 150, 100);  // 350: level 2
  program_charge(c, &t, "mid", 120, 0);     // level 1
  EXPECT_DOUBLE_EQ(program_service(t, "long"), 350);
  EXPECT_DOUBLE_EQ(t.served, 470);
  const std::vector<WaitingCall> q = {{"long", 470}, {"mid", 470}, {"new", 470}, {"", 470}};
  EXPECT_EQ(program_pick(c, t, q), 2u);  // "new" and "" are level 0: the earlier one
  const std::vector<WaitingCall> q2 = {{"long", 470}, {"mid", 470}};
  EXPECT_EQ(program_pick(c, t, q2), 1u);
  c.mode = ProgramScheduling::kFcfs;
  EXPECT_EQ(program_pick(c, t, q), 0u);
  EXPECT_EQ(program_pick(c, t, std::vector<WaitingCall>{}), std::nullopt);
}

TEST(ProgramPriorityTest, CallsWithoutAProgramAdvanceOnlyTheStarvationClock) {
  const ProgramSchedulingConfig c = plas();
  ProgramServiceTable t;
  program_charge(c, &t, "", 500, 500);
  EXPECT_TRUE(t.programs.empty());
  EXPECT_DOUBLE_EQ(t.served, 1500);
  EXPECT_DOUBLE_EQ(program_service(t, ""), 0);
}

TEST(ProgramPriorityTest, TheTableForgetsTheLeastRecentlyChargedProgram) {
  ProgramSchedulingConfig c = plas();
  c.max_programs = 2;
  ProgramServiceTable t;
  program_charge(c, &t, "a", 10, 0);
  program_charge(c, &t, "b", 10, 0);
  program_charge(c, &t, "a", 10, 0);  // a is now the more recent
  program_charge(c, &t, "c", 10, 0);  // b goes
  EXPECT_EQ(t.programs.size(), 2u);
  EXPECT_DOUBLE_EQ(program_service(t, "a"), 20);
  EXPECT_DOUBLE_EQ(program_service(t, "b"), 0);
  EXPECT_DOUBLE_EQ(program_service(t, "c"), 10);
  // A larger cap forgets the oldest eighth at once, the newest stay.
  c.max_programs = 16;
  ProgramServiceTable big;
  for (int i = 0; i <= 16; ++i) program_charge(c, &big, "p" + std::to_string(i), 1, 0);
  EXPECT_EQ(big.programs.size(), 14u);
  EXPECT_DOUBLE_EQ(program_service(big, "p0"), 0);
  EXPECT_DOUBLE_EQ(program_service(big, "p2"), 0);
  EXPECT_DOUBLE_EQ(program_service(big, "p3"), 1);
  EXPECT_DOUBLE_EQ(program_service(big, "p16"), 1);
}

TEST(ProgramPriorityTest, ConfigRejectsNonsense) {
  ProgramSchedulingConfig c;
  EXPECT_TRUE(c.validate().ok());
  c.quantum = 0;
  EXPECT_FALSE(c.validate().ok());
  c = {};
  c.levels = 0;
  EXPECT_FALSE(c.validate().ok());
  c = {};
  c.max_programs = 0;
  EXPECT_FALSE(c.validate().ok());
}

// A batch of `slots` sequences, one token per step each; programs arrive at 1.2x the capacity and
// run their calls one after another (no tool time). Completion = last call's end - arrival.
struct SimProgram {
  int calls = 0;
  int arrive = 0;
  int done = -1;
};

struct SimOutcome {
  double short_mean = 0, long_mean = 0;
  int finished = 0;
};

SimOutcome simulate_programs(const ProgramSchedulingConfig& c, std::vector<SimProgram> programs,
                             int slots, int prompt, int output) {
  ProgramServiceTable t;
  struct Call {
    size_t program;
    double arrived_at;
  };
  struct Running {
    size_t program;
    int left;
  };
  std::deque<Call> queue;
  std::vector<Running> running;
  std::vector<int> calls_left;
  for (const SimProgram& p : programs) calls_left.push_back(p.calls);
  size_t next_arrival = 0;
  const auto name = [](size_t i) { return "p" + std::to_string(i); };
  for (int step = 0; step < 1'000'000; ++step) {
    while (next_arrival < programs.size() && programs[next_arrival].arrive <= step) {
      queue.push_back({next_arrival++, t.served});
    }
    if (next_arrival == programs.size() && queue.empty() && running.empty()) break;
    while (static_cast<int>(running.size()) < slots && !queue.empty()) {
      std::vector<std::string> names;
      std::vector<WaitingCall> calls;
      for (const Call& q : queue) names.push_back(name(q.program));
      for (size_t i = 0; i < queue.size(); ++i) calls.push_back({names[i], queue[i].arrived_at});
      const size_t idx = *program_pick(c, t, calls);
      const size_t p = queue[idx].program;
      queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(idx));
      program_charge(c, &t, name(p), prompt, 0);
      running.push_back({p, output});
    }
    for (Running& r : running) {
      program_charge(c, &t, name(r.program), 0, 1);
      if (--r.left > 0) continue;
      if (--calls_left[r.program] == 0) {
        programs[r.program].done = step + 1;
      } else {
        queue.push_back({r.program, t.served});  // its next call, right away
      }
    }
    std::erase_if(running, [](const Running& r) { return r.left == 0; });
  }
  SimOutcome o;
  int n_short = 0, n_long = 0;
  for (const SimProgram& p : programs) {
    if (p.done < 0) continue;
    ++o.finished;
    const double completion = p.done - p.arrive;
    (p.calls <= 2 ? o.short_mean : o.long_mean) += completion;
    ++(p.calls <= 2 ? n_short : n_long);
  }
  o.short_mean /= std::max(1, n_short);
  o.long_mean /= std::max(1, n_long);
  return o;
}

TEST(ProgramPriorityTest, OverloadedShortProgramsFinishSoonerThanFirstComeFirstServed) {
  // Heavy-tailed program lengths: 80 % make 1-2 calls, 20 % make 10-20.
  std::mt19937 rng(7);
  std::vector<SimProgram> programs(400);
  double mean_calls = 0;
  for (SimProgram& p : programs) {
    p.calls = std::uniform_int_distribution<int>(0, 9)(rng) < 8
                  ? std::uniform_int_distribution<int>(1, 2)(rng)
                  : std::uniform_int_distribution<int>(10, 20)(rng);
    mean_calls += p.calls;
  }
  mean_calls /= static_cast<double>(programs.size());
  constexpr int kSlots = 4, kPrompt = 64, kOutput = 32;
  // Capacity: kSlots calls per kOutput steps; arrivals at 1.2x of it (programs per step).
  const double rate = 1.2 * kSlots / (kOutput * mean_calls);
  std::exponential_distribution<double> gap(rate);
  double at = 0;
  for (SimProgram& p : programs) p.arrive = static_cast<int>(at += gap(rng));
  ProgramSchedulingConfig c;  // the defaults keel serves with
  ProgramSchedulingConfig fcfs;
  fcfs.mode = ProgramScheduling::kFcfs;
  const SimOutcome a = simulate_programs(c, programs, kSlots, kPrompt, kOutput);
  const SimOutcome f = simulate_programs(fcfs, programs, kSlots, kPrompt, kOutput);
  ASSERT_EQ(a.finished, 400);
  ASSERT_EQ(f.finished, 400);  // the same work: equal throughput
  EXPECT_GT(f.short_mean / a.short_mean, 2.0)
      << "PLAS " << a.short_mean << " FCFS " << f.short_mean;
  EXPECT_LT(a.long_mean / f.long_mean, 1.5) << "PLAS " << a.long_mean << " FCFS " << f.long_mean;
}

// One slot: a long program's next call waits behind a new program's first call under PLAS, not
// under FCFS.
std::vector<RequestKey> admission_order(const ProgramSchedulingConfig& programs) {
  kv::KvCacheManager kv(kv::KvCacheConfig{64, 4, true});
  SchedulerConfig sc{1, 64, 256, 0};
  sc.programs = programs;
  Scheduler sched(sc, &kv);
  const kv::BlockHash extra = kv::request_extra_key(kv::BlockHash{3, 4}, "");
  std::vector<std::unique_ptr<RequestState>> states;
  const auto add = [&](RequestKey key, const char* program, int32_t max_tokens) {
    auto r = std::make_unique<RequestState>();
    r->key = key;
    r->tokens.assign(8, 0);
    std::iota(r->tokens.begin(), r->tokens.end(), static_cast<int32_t>(100 + 10 * key));
    r->num_prompt_tokens = 8;
    r->max_tokens = max_tokens;
    r->extra_key = extra;
    r->program = program;
    sched.add(r.get());
    states.push_back(std::move(r));
  };
  std::vector<RequestKey> order;
  const auto run = [&] {
    for (RequestKey k : testing::run_in_order(sched, states, 200)) order.push_back(k);
  };
  add(1, "agent", 40);  // the long program's first call: 8 + 2 x 40 = 88 weighted tokens
  run();
  add(2, "agent", 2);  // its next call, then a new program's first
  add(3, "chat", 2);
  run();
  EXPECT_DOUBLE_EQ(program_service(sched.programs(), "agent"), 88 + 12);
  return order;
}

TEST(ProgramPriorityTest, SchedulerAdmitsTheNewProgramBeforeTheLongOnesNextCall) {
  ProgramSchedulingConfig c;
  c.quantum = 50;
  EXPECT_EQ(admission_order(c), (std::vector<RequestKey>{1, 3, 2}));
  c.mode = ProgramScheduling::kFcfs;
  EXPECT_EQ(admission_order(c), (std::vector<RequestKey>{1, 2, 3}));
  c.mode = ProgramScheduling::kPlas;
  c.quantum = 1000;  // the long program is still at level 0: arrival order
  EXPECT_EQ(admission_order(c), (std::vector<RequestKey>{1, 2, 3}));
}

}  // namespace
}  // namespace keel::engine
