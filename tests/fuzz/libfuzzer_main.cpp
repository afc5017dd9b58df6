// libFuzzer's entry point for one fuzz target, compiled once per target's
// executable with -DTIMM_FUZZ_TARGET_NAME="<name>" (tests/fuzz/CMakeLists.txt).
// A timm::Error is the reader's refusal and ends the input quietly; any other
// exception is printed and aborts, and libFuzzer saves the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <typeinfo>

#include "fuzz_target.hpp"
#include "timm/base/error.hpp"

#ifndef TIMM_FUZZ_TARGET_NAME
#error "compile with -DTIMM_FUZZ_TARGET_NAME=\"<target>\""
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const timm::fuzz::Target* const target = [] {
    const timm::fuzz::Target* found = timm::fuzz::find_target(TIMM_FUZZ_TARGET_NAME);
    if (found == nullptr) {
      std::fprintf(stderr, "no fuzz target named '%s' is linked in\n", TIMM_FUZZ_TARGET_NAME);
      std::abort();
    }
    return found;
  }();
  try {
    target->run({data, size});
  } catch (const timm::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz target '%s' threw a %s, not a timm::Error: %s\n", TIMM_FUZZ_TARGET_NAME,
                 typeid(e).name(), e.what());
    std::abort();
  }
  return 0;
}
