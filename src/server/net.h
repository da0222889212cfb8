// The server's one include point for Boost.Asio (header-only; Boost::system links the error
// categories) and the namespace alias `net`. Boost 1.74's awaitable.hpp uses std::exchange
// without including <utility>, hence the include below.
//
// Thread safety: n/a (declarations only).
#pragma once

#include <utility>  // must precede the Asio headers (Boost 1.74)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace keel::server {
namespace net = boost::asio;
using tcp = boost::asio::ip::tcp;
using boost::system::error_code;
}  // namespace keel::server
