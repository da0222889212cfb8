// read_te_spec / read_je_spec: an executor's spec from where `keel te|je --spec SOURCE` names it —
// "-" = stdin to its end (how starters hand it over, executor_launch.h), else a file. Errors name
// the source: NotFound for a file that cannot be opened, InvalidArgument for an empty source or a
// spec the codec refuses (FailedPrecondition for a newer version).
//
// Thread safety: reads stdin; call once, from the main thread.
#pragma once

#include <string>

#include "cluster/protocol/je_spec.h"
#include "cluster/protocol/te_spec.h"
#include "core/result.h"

namespace keel::cluster {

[[nodiscard]] Result<TeSpec> read_te_spec(const std::string& source);
[[nodiscard]] Result<JeSpec> read_je_spec(const std::string& source);

}  // namespace keel::cluster
