// src/support/error.cpp - tle's exception types.
#include <fmt/format.h>

#include "tle/error.hpp"

namespace tle {

static std::string format_user(const SrcLoc& loc, const std::string& msg) {
  if (!loc.known()) return "error: " + msg;
  return fmt::format("{}:{}: error: {}", loc.file, loc.line, msg);
}

UserError::UserError(const SrcLoc& loc, const std::string& message)
    : std::runtime_error(format_user(loc, message)), file_(loc.file), message_(message), line_(loc.line) {}

RuntimeError::RuntimeError(const std::string& call, const std::string& message, std::string log)
    : std::runtime_error(log.empty() ? fmt::format("{}: {}", call, message)
                                     : fmt::format("{}: {}\n{}", call, message, log)),
      call_(call),
      message_(message),
      log_(std::move(log)) {}

}  // namespace tle
