// Shared command plumbing: turning ComputeOptions into a kernel table and thread count (with the
// KEEL_ISA environment override), and printing a Status as the one-line CLI error.
#pragma once

#include "commands.h"
#include "core/result.h"
#include "kernels/kernels.h"

namespace keel::cli {

struct ComputeSetup {
  kernels::Isa isa;
  int threads;
};

// --isa (or KEEL_ISA) must name a table this CPU supports; threads 0 → hardware threads.
Result<ComputeSetup> setup_compute(const ComputeOptions& opts);

// Prints "keel: <message>" to stderr and returns the exit code 1.
int report_error(const Status& s);

}  // namespace keel::cli
