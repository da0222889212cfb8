// add_serve_command: the `keel serve` subcommand and its flags (serve_flags.cpp).
#pragma once

#include <CLI/CLI.hpp>

#include "commands.h"

namespace keel::cli {

// Adds `serve` to `app` with every flag bound to *o (which must outlive parsing).
CLI::App* add_serve_command(CLI::App& app, ServeOptions* o);

}  // namespace keel::cli
