// What `keel cluster up` starts, worked out from its flags before anything runs: the TE kinds in
// start order and how many, each TE's threads and memory reservation, each TE's spec
// (cluster/protocol/te_spec.h: a TE, a warm-pool TE), each JE's (cluster/protocol/je_spec.h) and
// the checks on flag combinations (pipelined TEs). Pure functions of ClusterUpOptions (and a GGUF's
// size); no process is started here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/protocol/je_spec.h"
#include "cluster/protocol/te_spec.h"
#include "control/up/up_options.h"
#include "core/result.h"

namespace keel::control {

// A TE's engine (what a node agent and a warm TE's bind get). `kind`: colocated | prefill |
// decode, or semi-pd (a colocated TE with the semi-PD engine); only a prefill TE hands KV off.
cluster::TeEngineSpec te_engine_spec(const ClusterUpOptions& o, const std::string& kind);

// The spec of TE `i` (id te-<i>) of `kind` with `threads` compute threads, on this machine.
cluster::TeSpec te_spec(const ClusterUpOptions& o, const std::string& path, const std::string& name,
                        int i, int threads, const std::string& kind);

// A JE's id: je-<i>; under --nodes auto <model>-je-<i>-<manager id> (several models' managers, and
// a leader's and its standbys' JEs, share the membership there).
std::string je_id(const ClusterUpOptions& o, const std::string& name, int i,
                  const std::string& manager);

// The spec of JE `id`, routing to `tes` (none: it learns them later). With --membership etcd,
// each executor joins the membership itself (its own lease, so it leaves the routing set within
// the TTL when it dies or its host is cut off) and JEs follow the TEs there.
cluster::JeSpec je_spec(const ClusterUpOptions& o, const std::string& path, const std::string& name,
                        const std::string& id, const std::vector<std::string>& tes);

// Whether the autoscaler runs (--max, --max-prefill or --max-decode > 0).
bool autoscaling(const ClusterUpOptions& o);
// Whether it scales prefill and decode TEs apart (--max-prefill or --max-decode > 0).
bool role_autoscaling(const ClusterUpOptions& o);
// The role groups' flags: a PD fleet to scale, min <= max, the start-up counts within max.
Status check_role_autoscaling(const ClusterUpOptions& o);

// Colocated TEs at start-up: --colocated, else 2 (0 with prefill/decode or semi-PD TEs; --min
// when autoscaling).
int colocated_tes(const ClusterUpOptions& o);

// TEs at start-up (colocated + semi-PD + prefill + decode).
int initial_tes(const ClusterUpOptions& o);

// Each TE's compute threads: --threads-per-te, else the machine's threads / processes (a
// pipelined TE is --pp processes, each with these threads; an autoscaled group counts at its max).
int threads_per_te(const ClusterUpOptions& o);

// A warm pool TE's spec: a colocated TE's, warm (the pool names it; with --te-stores it also
// gives each its own store).
cluster::TeSpec warm_te_spec(const ClusterUpOptions& o, const std::string& path,
                             const std::string& name, int threads);

// What each TE reserves on its host for gang placement: --te-memory-bytes, else the GGUF's size
// and the KV cache's bytes.
int64_t te_memory_bytes(const ClusterUpOptions& o, const std::string& path);

// --pp 2: colocated TEs only, each two processes (a warm TE starts its stage 1 at its bind); not
// with prefill/decode or semi-PD TEs, nor the peer tier.
Status check_pipelined(const ClusterUpOptions& o);

// The TE kinds asked for, in start order: colocated, semi-pd, prefill, decode.
std::vector<std::string> te_kinds(const ClusterUpOptions& o);

}  // namespace keel::control
