// A TE's options (`keel te`'s flag table, cluster_commands.h) from its TeSpec (cluster/te_spec.h):
// `keel te --spec -` reads the spec a starter wrote on its stdin and runs as if given the flags;
// a warm TE's bind replaces the engine part the same way. And the spec's membership part from the
// membership flags.
#pragma once

#include <string>

#include "cluster/te_spec.h"
#include "cluster_commands.h"
#include "core/result.h"

namespace keel::cli {

// Sets `te`'s engine, KV hand-off and peer-tier options from `e`; its compute threads and
// kernels stay.
void apply_engine_spec(const cluster::TeEngineSpec& e, TeOptions* te);

// The options of a TE started from `spec`.
[[nodiscard]] TeOptions te_options(const cluster::TeSpec& spec);

[[nodiscard]] cluster::TeMembershipSpec membership_spec(const MembershipOptions& m);

// Reads a spec from `source`: "-" = stdin to its end, else a file. Errors name the source.
[[nodiscard]] Result<cluster::TeSpec> read_te_spec(const std::string& source);

}  // namespace keel::cli
