// Instance gangs: which processes one serving instance is, as the cluster manager places it
// (cluster_nodes.h) — a colocated or semi-PD TE alone; the k-th prefill TE with the k-th decode
// TE; a pipeline-parallel TE (`--pp 2`) with its stage 1 (role pp-stage), stage 1 first; an
// expert-parallel TE (`--ep N`) with its N − 1 expert members (role ep-expert, shards 1..N−1),
// the members first and the gang spread (each process on a host of its own where the hosts allow:
// cluster/policy/gang_placement.h), so that the TE is then started with the members' addresses as
// its remote members (TeEngineSpec::ep_remote) and starts none of its own. A stage or a member
// registers nothing and serves only its TE; each exits with it.
//
// Thread safety: pure functions over plain structs.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cluster/protocol/node_messages.h"

namespace keel::control {

// One instance to place as a gang. Each process's `threads` and `memory_bytes` are what it
// reserves; its `instance` and `priority` are set from here.
struct GangStart {
  std::string instance;  // unique in the cluster
  int32_t priority = 0;  // higher wins (as a Kubernetes PriorityClass value)
  std::vector<cluster::StartTe> tes;
};

// Whether a StartTe role is a TE (registers, takes tasks) rather than a process of a TE's gang
// (pp-stage, ep-expert).
[[nodiscard]] bool is_te_role(const std::string& role);

// Whether `te` is a pipeline-parallel TE (colocated, `--pp 2` in its args): placed with its
// stage 1 (stage_start) as one gang, stage 1 first; its start then gets `--pp-stage1 ADDRESS`.
[[nodiscard]] bool pipelined(const cluster::StartTe& te);
// The stage-1 process of pipelined `te`: `<id>-stage1`, role pp-stage, the same model, threads
// and reservation, and the flags `keel pp-stage` shares with it (-c, --weight-layout, --isa,
// --mmap).
[[nodiscard]] cluster::StartTe stage_start(const cluster::StartTe& te);

// Whether `te` is an expert-parallel TE whose members the manager places (colocated, ep > 1, no
// remote members named yet).
[[nodiscard]] bool expert_parallel(const cluster::StartTe& te);
// Member `shard` (1 ≤ shard < ep) of expert-parallel `te`: `<id>-ep<shard>`, role ep-expert, the
// same model, threads, kernels and weight layout; it reserves the TE's threads and 1/ep of the
// TE's memory (its range of the experts is at most that share of the file; the TE itself keeps its
// whole reservation: attention, the head and the KV cache stay there).
[[nodiscard]] cluster::StartTe member_start(const cluster::StartTe& te, int32_t shard);

// `te` as a gang of its own named `instance`: with its stage 1 first when pipelined, with its
// members first (and spread) when expert-parallel.
[[nodiscard]] GangStart gang_of(const std::string& instance, int32_t priority, cluster::StartTe te);
// Whether `g` asks to be spread (it holds expert members).
[[nodiscard]] bool spread(const GangStart& g);
// Whether `g`'s processes serve only together (it holds a stage or members: they exit with their
// TE, and the TE cannot serve without them), so it is stopped and replaced as a whole; a prefill +
// decode pair's TEs serve on their own.
[[nodiscard]] bool serves_together(const GangStart& g);

// index entry of a process that is not one of `starts` (a stage 1, an expert member).
inline constexpr size_t kNotATe = static_cast<size_t>(-1);

// A model's TEs as instances: each colocated (or semi-PD) TE alone (`<model>-te-<i>`; a pipelined
// one with its stage 1 before it, `<model>-pp-<i>`; an expert-parallel one with its members
// before it, `<model>-ep-<i>`), the k-th prefill TE with the k-th decode TE (`<model>-pd-<k>`; a
// prefill or decode TE left over alone).
// index[g]: the positions in `starts` of gang g's processes, in the gang's order (kNotATe for a
// stage 1 or a member).
struct ModelGangs {
  std::vector<GangStart> gangs;
  std::vector<std::vector<size_t>> index;
};
[[nodiscard]] ModelGangs model_gangs(const std::string& model, int32_t priority,
                                     const std::vector<cluster::StartTe>& starts);

}  // namespace keel::control
