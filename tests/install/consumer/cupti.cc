// Consumer of graphcheck::cupti: parses an injection configuration (no driver needed).
#include <iostream>
#include <string_view>

#include "cupti/inject_config.h"

int main() {
  const graphcheck::cupti::InjectConfig config =
      graphcheck::cupti::parse_inject_config([](const char* name) -> const char* {
        return std::string_view(name) == "GRAPHCHECK_CHECK" ? "launch" : nullptr;
      });
  std::cout << "check at launch: "
            << (config.check == graphcheck::cupti::CheckWhen::kLaunch ? "yes" : "no") << "\n";
  return 0;
}
