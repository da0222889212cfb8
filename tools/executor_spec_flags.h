// A TE's and a JE's options (`keel te`'s and `keel je`'s flag tables, cluster_commands.h) from
// their specs (cluster/te_spec.h, cluster/je_spec.h): `keel te --spec -` / `keel je --spec -` read
// the spec a starter wrote on their stdin and run as if given the flags; a warm TE's bind replaces
// the engine part the same way.
#pragma once

#include <string>

#include "cluster/je_spec.h"
#include "cluster/te_spec.h"
#include "cluster_commands.h"
#include "core/result.h"

namespace keel::cli {

// Sets `te`'s engine, KV hand-off and peer-tier options from `e`; its compute threads and
// kernels stay.
void apply_engine_spec(const cluster::TeEngineSpec& e, TeOptions* te);

// The options of a TE started from `spec`.
[[nodiscard]] TeOptions te_options(const cluster::TeSpec& spec);

// The options of a JE started from `spec`.
[[nodiscard]] JeOptions je_options(const cluster::JeSpec& spec);

}  // namespace keel::cli
