// A TE's options (`keel te`'s flag table, cluster_commands.h) and its spec
// (cluster/protocol/te_spec.h), both ways: `keel te --spec -` reads the spec a starter wrote on its
// stdin and runs as if given the flags; `keel te` with flags runs the spec they make.
#pragma once

#include <string>

#include "cluster/protocol/je_spec.h"
#include "cluster/protocol/te_spec.h"
#include "cluster_commands.h"
#include "core/result.h"

namespace keel::cli {

// Sets `te`'s engine, KV hand-off and peer-tier options from `e`; its compute threads and
// kernels stay.
void apply_engine_spec(const cluster::TeEngineSpec& e, TeOptions* te);

// The spec of a TE started with flags `te` (apply_engine_spec's and te_options' inverse; not
// validated: the flags were, by their parser).
[[nodiscard]] cluster::TeSpec te_spec_of(const TeOptions& te);

// The options of a TE started from `spec`.
[[nodiscard]] TeOptions te_options(const cluster::TeSpec& spec);

}  // namespace keel::cli
