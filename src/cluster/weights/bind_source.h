// Bind source: where a TE being bound to a model gets its weights — the cluster manager's choice
// (`keel cluster up --bind-source auto|store|fork|disk`), a pure function of what the manager
// knows: whether each target's host store already holds the model's entry, which running TEs
// serve the entry (their weights services), and the mode.
//
//   auto   the host store when it holds the entry; else a fork from a ready peer that serves it
//          (several targets bound at once form a chain: each forks from the one before, which
//          relays the chunks as they reach it); else the file (disk)
//   store  the host store when it holds the entry, else the file (never a fork)
//   fork   a fork when a peer serves the entry (even if the host store holds it: the TE then
//          finds it there and maps it), else the file
//   disk   always the file (the store is not used)
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace keel::cluster {

enum class BindSourceMode { kAuto, kStore, kFork, kDisk };
enum class BindSourceKind { kStore, kFork, kDisk };

[[nodiscard]] std::string_view bind_source_mode_name(BindSourceMode mode);
[[nodiscard]] std::optional<BindSourceMode> parse_bind_source_mode(std::string_view name);
[[nodiscard]] std::string_view bind_source_kind_name(BindSourceKind kind);

// One TE about to be bound.
struct BindTarget {
  bool entry_in_store = false;  // its host store holds the model's entry
  std::string weights_address;  // its own weights service ("" = none: it cannot relay)
};

struct BindSourcePlan {
  BindSourceKind kind = BindSourceKind::kDisk;
  std::string fork_from;  // kFork: the weights service to pull from ("host:port")
  std::string why;        // one line for the event log
};

// One plan per target, in order. `peers`: weights services of running TEs whose stores hold the
// entry (the first is used). A target forks from the nearest earlier target of this batch that
// forks and can relay, else from peers[0].
[[nodiscard]] std::vector<BindSourcePlan> plan_bind_sources(BindSourceMode mode,
                                                            const std::vector<BindTarget>& targets,
                                                            const std::vector<std::string>& peers);

}  // namespace keel::cluster
