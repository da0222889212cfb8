// AdmissionQueue: the JE's one admission layer — the jobs it holds back while its fleet is full,
// and the order they are let in (docs/cluster.md, "Admission"). Every ordering a workload needs
// plugs in here instead of a queue of its own: the work class (interactive before batch, batch
// before training), the request's priority (vLLM's `priority`: lower first), then fair shares
// between tenants by the Virtual Token Counter (VTC, OSDI'24 — each tenant's counter grows by
// w_in·prompt + w_out·generated tokens over its weight; the backlogged tenant with the smallest
// counter goes first, and a tenant that becomes backlogged is lifted to the smallest backlogged
// counter, so idle time earns no credit), then, among equal counters, program-aware admission
// (engine/program_priority.h, Autellix's PLAS: the job whose agent program has received the least
// service, by levels), then arrival order.
//
// A pure data structure: no threads, no clock, no I/O; the JE calls it under its mutex.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cluster/protocol/messages.h"
#include "engine/program_priority.h"
#include "engine/types.h"

namespace keel::cluster {

struct AdmissionConfig {
  // VTC's cost of a token: prompt tokens (admitted) and generated tokens (as they are reported).
  double w_in = 1.0;
  double w_out = 2.0;
  // Each tenant's share (absent: 1). A tenant of weight 2 gets twice the tokens of one of weight 1
  // while both are backlogged.
  std::map<std::string, double> tenant_weights;
  // Program-aware admission within a tenant (the programs' service is kept here, per JE).
  engine::ProgramSchedulingConfig programs;
};

// What the layer knows of a waiting job.
struct WaitingJob {
  JobRef ref;
  engine::WorkClass work_class = engine::WorkClass::kInteractive;
  int32_t priority = 0;  // lower first
  std::string tenant;    // "" = the default tenant
  int64_t prompt_tokens = 0;
  std::string program;  // its agent program ("" = a program of its own)
};

class AdmissionQueue {
 public:
  explicit AdmissionQueue(AdmissionConfig config = {}) : config_(std::move(config)) {}

  // Holds `job` (a tenant with nothing waiting before is lifted to the smallest backlogged
  // counter). A job already held is refused (false).
  bool push(WaitingJob job);
  // The next job to let in, out of the queue, its prompt charged to its tenant; none when empty.
  std::optional<WaitingJob> pop();
  // Drops a held job (aborted while it waited); false when not held.
  bool remove(const JobRef& ref);
  // Charges `tokens` generated tokens of a job of `tenant` (and of `program`) that was let in.
  void charge_generated(const std::string& tenant, int64_t tokens, const std::string& program = {});

  [[nodiscard]] size_t size() const { return waiting_.size(); }
  [[nodiscard]] bool empty() const { return waiting_.empty(); }
  [[nodiscard]] bool holds(const JobRef& ref) const;
  // A program's service so far (program_priority.h); 0 for "" or one never seen.
  [[nodiscard]] double program_service(const std::string& program) const;
  // A tenant's counter (tokens served over its weight, lifted as above); 0 for one never seen.
  [[nodiscard]] double counter(const std::string& tenant) const;
  // Jobs held per work class (for /metrics), indexed by the class's value.
  [[nodiscard]] std::vector<int64_t> waiting_per_class() const;

 private:
  struct Held {
    WaitingJob job;
    uint64_t seq = 0;
    double arrived_at = 0.0;  // programs_.served when it was pushed
  };
  [[nodiscard]] double weight(const std::string& tenant) const;
  [[nodiscard]] bool backlogged(const std::string& tenant) const;
  // Whether `a` goes before `b`: class, priority, tenant counter, program level, arrival.
  [[nodiscard]] bool before(const Held& a, const Held& b) const;
  [[nodiscard]] int32_t program_level(const Held& h) const;

  AdmissionConfig config_;
  std::vector<Held> waiting_;
  std::map<std::string, double> counters_;
  engine::ProgramServiceTable programs_;
  uint64_t next_seq_ = 0;
};

}  // namespace keel::cluster
