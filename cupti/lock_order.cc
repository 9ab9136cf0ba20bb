#include "cupti/lock_order.h"

#include <graphcheck/error.h>

#include <string>

namespace graphcheck::cupti::detail {
namespace {

thread_local int t_session_locks = 0;

}  // namespace

SessionLockScope::SessionLockScope() { ++t_session_locks; }

SessionLockScope::~SessionLockScope() { --t_session_locks; }

bool session_lock_held() noexcept { return t_session_locks > 0; }

void check_not_under_session_lock(std::string_view what) {
  if (session_lock_held()) {
    throw Error("graphcheck: lock order violated: " + std::string(what) +
                " while holding the checker session's mutex; the session must gather from its "
                "sources before it locks (cupti/lock_order.h)");
  }
}

}  // namespace graphcheck::cupti::detail
