// The warm pool's bind: a binder (the cluster manager, `keel cluster bench-scale`) tells a warm,
// model-less TE (`keel te --warm`) which model to serve; the TE loads it — mapping its model
// store entry when there is one, else reading the file — builds its engine, generates one warm-up
// token, starts its TE-shell and answers with its control port and the scale-out's phase times.
//
//   binder → warm TE  bind_model (a call on the TE's bind port; the reply is a BindReply)
//
// Phase times are steady-clock (CLOCK_MONOTONIC) nanoseconds, one clock for every process of a
// host, so the binder's decision and the TE's marks compare directly. The phases (DeepServe's
// Table 2): scaler-pre = decision → bind received (a TE chosen, or started for a cold start);
// pre-load = → weights at hand (store entry checked and mapped, or the file read); load = →
// engine built; post-load = → the warm-up token; announce = → TE-shell listening, ready to JEs.
//
// With fork_from, pre-load includes pulling the entry from a peer TE (weights_fork.h); a failed
// fork falls back to the file, and the reply says why (fork_error).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/protocol/messages.h"
#include "cluster/protocol/te_spec.h"
#include "core/result.h"

namespace keel::cluster {

inline constexpr std::string_view kBindModel = "bind_model";

struct BindModel {
  std::string model_path;   // the GGUF (the fallback when there is no usable store entry)
  std::string store_entry;  // the entry's name when the binder preloaded it; "" = look it up
  std::string role = "colocated";
  int64_t decision_ns = 0;  // when the scale-out was decided (steady clock)
  // Fork: when the TE's store lacks `store_entry`, pull it from this peer's weights service
  // ("host:port", weights_fork.h) first; "" = no fork (map the entry, else read the file).
  std::string fork_from;
  // false: read the file even when the TE's store holds the entry (`--bind-source disk`).
  bool use_store = true;
  // The engine to serve the model with (te_spec.h), replacing the warm TE's own (a node agent
  // passes a start_te's); none = the warm TE's own. The kernels and threads stay as started:
  // a non-empty `isa` other than the warm TE's fails the bind (the binder then cold-starts).
  std::optional<TeEngineSpec> engine;
  std::string isa;
};

struct ScaleOutPhases {
  int64_t decision_ns = 0;
  int64_t bound_ns = 0;        // the TE received the bind
  int64_t preloaded_ns = 0;    // weights at hand
  int64_t loaded_ns = 0;       // engine built
  int64_t first_token_ns = 0;  // warm-up token generated
  int64_t announced_ns = 0;    // TE-shell listening
};

struct BindReply {
  Status status;            // the bind's outcome
  int port = 0;             // the TE's control port (JEs connect here)
  bool from_store = false;  // the weights were mapped from the model store
  std::string store_note;   // why the store was not used ("" when it was)
  bool forked = false;      // the entry was forked from bind.fork_from (then mapped)
  uint64_t fork_bytes = 0;
  double fork_seconds = 0;  // the fork alone (inside the pre-load phase)
  std::string fork_error;   // why the fork failed (the TE then loaded the file); "" otherwise
  ScaleOutPhases phases;
};

// Steady-clock now in nanoseconds.
[[nodiscard]] int64_t steady_now_ns();

[[nodiscard]] net::Message encode_bind_model(const BindModel& m);
[[nodiscard]] Result<BindModel> decode_bind_model(const Json& body);
[[nodiscard]] Json encode_bind_reply(const BindReply& r);
[[nodiscard]] Result<BindReply> decode_bind_reply(const Json& body);

// Phase durations in seconds, named as above: {"scaler_pre": s, "pre_load": ..., "load": ...,
// "post_load": ..., "announce": ...}.
[[nodiscard]] Json phase_seconds(const ScaleOutPhases& p);

}  // namespace keel::cluster
