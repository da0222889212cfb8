// run_op: drives one asynchronous Boost.Asio operation to completion on a private io_context —
// the synchronous style of the HTTP clients (pull/http_fetch.cpp, kube/kube_http.cpp), whose
// deadlines are the streams' own timers. Header-only (a template over the operation's start).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
#include <utility>

namespace keel::pull {

// Calls start(handler) and runs `ioc` until the operation (and anything it queued) is done;
// returns the handler's error code.
template <class Start>
boost::system::error_code run_op(boost::asio::io_context& ioc, Start&& start) {
  boost::system::error_code result;
  std::forward<Start>(start)([&result](boost::system::error_code ec, auto&&...) { result = ec; });
  ioc.restart();
  ioc.run();
  return result;
}

}  // namespace keel::pull
